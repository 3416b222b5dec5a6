import AMQP
import PushCore
import PushServiceKit
import Testing

/// The settler's decisions, without a broker: a disposition and a delivery's headers → what is
/// published where, with which headers, and whether the delivery is acked, requeued or left.
@Suite struct DeliverySettlerTests {
    let queues = PushQueues(prefix: "t")
    var settler: DeliverySettler {
        DeliverySettler(queue: queues.registrations, queues: queues, subject: "registration message", gaveUp: "token registry unavailable")
    }
    let body = Array(#"{"app": "com.example"}"#.utf8)

    func properties(_ headers: AMQPTable = [:]) -> AMQPProperties {
        AMQPProperties(headers: headers.merging(["x-test": "kept"]) { new, _ in new }, messageID: "m-1")
    }

    @Test func theConstantsAreTheContracts() {
        #expect(DeliverySettler.retriesHeader == "x-push-retries")
        #expect(DeliverySettler.maximumRetries == 10)
        #expect(DeliverySettler.publishFailureBackoff == .seconds(1))
    }

    @Test func anAckPublishesNothingAndAcks() {
        let settlement = settler.settlement(for: .ack, body: body, properties: properties())
        #expect(settlement.messages.isEmpty)
        #expect(!settlement.gaveUp)
        #expect(settlement.action(settleable: true, publishFailed: false) == .ack)
        // Nothing to publish: the ack goes out even on a dead connection (where the broker ignores it).
        #expect(settlement.action(settleable: false, publishFailed: false) == .ack)
    }

    @Test func outcomeMessagesArePublishedBeforeTheAckAndAFailedPublishRequeuesAfterTheBackoff() {
        let event = AMQPOutboundMessage(exchange: "t.events", routingKey: "token.removed", body: [1, 2, 3], mandatory: false)
        let settlement = settler.settlement(for: .ackAfterPublishing([event, event]), body: body, properties: properties())
        #expect(settlement.messages.count == 2)
        #expect(settlement.messages.allSatisfy { $0.exchange == "t.events" && $0.routingKey == "token.removed" && $0.body == [1, 2, 3] })
        #expect(settlement.action(settleable: true, publishFailed: false) == .ack)
        #expect(settlement.action(settleable: true, publishFailed: true) == .requeue(after: DeliverySettler.publishFailureBackoff))
        #expect(settlement.action(settleable: false, publishFailed: false) == .leave, "the redelivery publishes them")
    }

    @Test func aFirstRetryGoesToTheFirstTierWithTheCountAndTheOriginal() throws {
        let settlement = settler.settlement(for: .retry(reason: "Redis down"), body: body, properties: properties(), now: 1_000_000)
        guard case .retry(let copy, let retries, let reason) = settlement else {
            Issue.record("not a retry: \(settlement)")
            return
        }
        #expect(copy.exchange == "", "retry tiers are reached through the default exchange")
        #expect(copy.routingKey == "t.registrations.retry.5s")
        #expect(copy.body == body)
        #expect(copy.properties.headers["x-push-retries"] == .int64(1))
        #expect(copy.properties.headers["x-test"] == "kept")
        #expect(copy.properties.headers[PushQueues.errorHeader] == nil)
        #expect(copy.properties.messageID == "m-1" && copy.properties.persistent)
        // Stamped with when it is due back (now + the 5 s tier): its wait in the tier is not age.
        #expect(copy.properties.timestamp == 1_000_005)
        #expect(retries == 1 && reason == "Redis down")
        #expect(settlement.action(settleable: true, publishFailed: false) == .ack)
        #expect(settlement.action(settleable: true, publishFailed: true) == .requeue(after: .seconds(1)))
        #expect(settlement.action(settleable: false, publishFailed: false) == .leave)
    }

    @Test(arguments: [
        (AMQPFieldValue.int64(1), "t.registrations.retry.1m", 2),
        (.int32(2), "t.registrations.retry.10m", 3),
        (.uint8(5), "t.registrations.retry.10m", 6),
        (.int16(9), "t.registrations.retry.10m", 10),
    ])
    func retriesClimbTheTiersAndStayOnTheLongest(header: AMQPFieldValue, queue: String, count: Int) {
        let settlement = settler.settlement(for: .retry(reason: "x"), body: body, properties: properties(["x-push-retries": header]))
        guard case .retry(let copy, let retries, _) = settlement else {
            Issue.record("not a retry: \(settlement)")
            return
        }
        #expect(copy.routingKey == queue)
        #expect(copy.properties.headers["x-push-retries"] == .int64(Int64(count)))
        #expect(retries == count)
    }

    /// A retry that must wait (APNs asked for a delay, the app is paused) skips the shorter tiers and
    /// is stamped with the longer wait; the count still climbs by one.
    @Test func aRetryNeverTakesATierShorterThanItsWait() throws {
        let send = DeliverySettler(queue: queues.send, queues: queues, subject: "send batch", gaveUp: "APNs unavailable")
        let settlement = send.settlement(
            for: .retry(reason: "InternalServerError", atLeast: .seconds(900)), body: body, properties: properties(), now: 1_000_000)
        guard case .retry(let copy, let retries, _) = settlement else {
            Issue.record("not a retry: \(settlement)")
            return
        }
        #expect(copy.routingKey == "t.send.retry.15m")
        #expect(copy.properties.timestamp == 1_000_900)
        #expect(retries == 1)
        let paused = send.settlement(
            for: .retry(reason: "Paused", atLeast: .seconds(60)), body: body, properties: properties(["x-push-retries": .int64(1)]))
        guard case .retry(let later, _, _) = paused else {
            Issue.record("not a retry: \(paused)")
            return
        }
        #expect(later.routingKey == "t.send.retry.2m", "the shortest tier covering a 60 s pause")
    }

    @Test(arguments: [
        (AMQPFieldValue.int64(10), "token registry unavailable after 10 retries: Redis down"),
        (.int64(Int64.max), "token registry unavailable: x-push-retries is \(Int64.max), more than the 10 retries a delivery gets: Redis down"),
        (.int64(11), "token registry unavailable: x-push-retries is 11, more than the 10 retries a delivery gets: Redis down"),
        (.int64(-1), "token registry unavailable: x-push-retries is -1, not a retry count (0 or more): Redis down"),
        (.int32(Int32.min), "token registry unavailable: x-push-retries is \(Int32.min), not a retry count (0 or more): Redis down"),
        (.string("3"), "token registry unavailable: x-push-retries is not a retry count: Redis down"),
        (.double(1), "token registry unavailable: x-push-retries is not a retry count: Redis down"),
        (.void, "token registry unavailable: x-push-retries is not a retry count: Redis down"),
    ])
    func usedUpNegativeOrMalformedRetriesDeadLetter(header: AMQPFieldValue, expected: String) {
        let settlement = settler.settlement(for: .retry(reason: "Redis down"), body: body, properties: properties(["x-push-retries": header]))
        guard case .deadLetter(let message, let reason, true) = settlement else {
            Issue.record("not a dead letter after giving up: \(settlement)")
            return
        }
        #expect(reason == expected)
        #expect(settlement.gaveUp)
        #expect(message.exchange == "t" && message.routingKey == "dead")
        #expect(message.body == body)
        #expect(message.properties.headers[PushQueues.errorHeader] == .string(expected))
        #expect(message.properties.headers["x-push-retries"] == header, "the original headers, as they were")
        #expect(message.properties.headers["x-test"] == "kept")
    }

    @Test func aDeadLetterIsTheOriginalWithTheReason() {
        let settlement = settler.settlement(for: .deadLetter(reason: "token: not hex"), body: body, properties: properties())
        guard case .deadLetter(let message, "token: not hex", false) = settlement else {
            Issue.record("not a plain dead letter: \(settlement)")
            return
        }
        #expect(!settlement.gaveUp)
        #expect(message.exchange == "t" && message.routingKey == "dead" && message.body == body && message.mandatory)
        #expect(message.properties.headers[PushQueues.errorHeader] == "token: not hex")
        #expect(message.properties.headers["x-test"] == "kept" && message.properties.messageID == "m-1")
        #expect(message.properties.contentType == "application/json" && message.properties.persistent)
        #expect(settlement.action(settleable: true, publishFailed: true) == .requeue(after: .seconds(1)))
        #expect(settlement.action(settleable: false, publishFailed: false) == .leave)
    }

    @Test func requeuesAndAbandonsPublishNothing() {
        let requeue = settler.settlement(for: .requeue(after: .zero), body: body, properties: properties())
        #expect(requeue.messages.isEmpty)
        #expect(requeue.action(settleable: true, publishFailed: false) == .requeue(after: .zero))
        let later = settler.settlement(for: .requeue(after: .seconds(1)), body: body, properties: properties())
        #expect(later.action(settleable: false, publishFailed: false) == .requeue(after: .seconds(1)))
        let abandon = settler.settlement(for: .abandon, body: body, properties: properties())
        #expect(abandon.messages.isEmpty)
        #expect(abandon.action(settleable: true, publishFailed: false) == .leave)
    }

    @Test func theRetryCountReadsEveryIntegerKindAndRefusesTheRest() {
        #expect(DeliverySettler.retries(in: [:]) == 0)
        #expect(DeliverySettler.retries(in: ["x-push-retries": .uint32(7)]) == 7)
        #expect(DeliverySettler.retries(in: ["x-push-retries": .int64(-4)]) == -4)
        #expect(DeliverySettler.retries(in: ["x-push-retries": "7"]) == nil)
        #expect(DeliverySettler.retries(in: ["x-push-retries": .bool(true)]) == nil)
    }

    // MARK: Settling a batch with the broker

    @Test func aBatchRequeuesFirstThenAcksWithOneMultipleAck() {
        let backoff = DeliverySettler.publishFailureBackoff
        let plan = SettlementPlan([.ack, .requeue(after: backoff), .ack, .ack], multipleAck: true)
        #expect(plan.requeue == [1] && plan.requeueDelay == backoff)
        #expect(plan.ack.isEmpty && plan.ackThrough == 3)
        let allRequeued = SettlementPlan([.requeue(after: backoff), .requeue(after: backoff)], multipleAck: true)
        #expect(allRequeued.requeue == [0, 1] && allRequeued.ack.isEmpty && allRequeued.ackThrough == nil)
        let lastRequeued = SettlementPlan([.ack, .requeue(after: backoff)], multipleAck: true)
        #expect(lastRequeued.requeue == [1] && lastRequeued.ackThrough == 0)
    }

    @Test func withoutMultipleAckOrWithADeliveryLeftAloneEachIsAckedOnItsOwn() {
        let single = SettlementPlan([.ack], multipleAck: false)
        #expect(single.ack == [0] && single.ackThrough == nil && single.requeue.isEmpty)
        let unordered = SettlementPlan([.ack, .requeue(after: .zero), .ack], multipleAck: false)
        #expect(unordered.ack == [0, 2] && unordered.ackThrough == nil && unordered.requeue == [1] && unordered.requeueDelay == .zero)
        // A multiple ack would ack the delivery left to its redelivery too.
        let withLeft = SettlementPlan([.ack, .leave, .ack], multipleAck: true)
        #expect(withLeft.ack == [0, 2] && withLeft.ackThrough == nil)
        let left = SettlementPlan([.leave], multipleAck: false)
        #expect(left == SettlementPlan([], multipleAck: false))
    }

    @Test func theLongestRequeueDelayIsWaitedOnce() {
        let plan = SettlementPlan([.requeue(after: .zero), .requeue(after: .seconds(1)), .requeue(after: .milliseconds(10))], multipleAck: true)
        #expect(plan.requeue == [0, 1, 2] && plan.requeueDelay == .seconds(1))
    }
}
