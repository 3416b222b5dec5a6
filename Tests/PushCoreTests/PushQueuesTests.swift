import Testing

@testable import PushCore

@Suite struct PushQueuesTests {
    @Test func retryQueueNamesUseWholeUnits() {
        let queue = WorkQueue(name: "w", routingKey: "w", retryTiers: [.milliseconds(250), .seconds(1), .seconds(90), .seconds(120), .seconds(7200)])
        #expect(queue.retryQueues.map(\.name) == ["w.retry.250ms", "w.retry.1s", "w.retry.90s", "w.retry.2m", "w.retry.2h"])
    }

    @Test func sendQueueHasGrowingTiers() {
        let delays = PushQueues.standard.send.retryTiers
        #expect(delays == delays.sorted())
        #expect(PushQueues.standard.send.retryQueue(tier: 0) == "push.send.retry.1s")
        #expect(PushQueues.standard.send.retryQueues.last?.name == "push.send.retry.15m", "Apple's 15 minutes after a 5xx")
    }

    @Test func aTierClimbsWithTheCountAndNeverGoesBelowTheWaitAskedFor() {
        let tiers: [Duration] = [.seconds(1), .seconds(5), .seconds(30), .seconds(120), .seconds(600), .seconds(900)]
        #expect((0..<8).map { WorkQueue.tier(afterRetries: $0, atLeast: .zero, in: tiers) } == [0, 1, 2, 3, 4, 5, 5, 5])
        #expect((0..<5).map { WorkQueue.tier(afterRetries: $0, atLeast: .seconds(30), in: tiers) } == [2, 2, 2, 3, 4])
        #expect((0..<3).map { WorkQueue.tier(afterRetries: $0, atLeast: .seconds(900), in: tiers) } == [5, 5, 5])
        #expect(WorkQueue.tier(afterRetries: 0, atLeast: .seconds(3600), in: tiers) == 5, "longer than every tier: the last")
        #expect(WorkQueue.tier(afterRetries: 0, atLeast: .milliseconds(1001), in: tiers) == 1)
        #expect(WorkQueue.tier(afterRetries: -3, atLeast: .zero, in: tiers) == 0)
        let send = PushQueues.standard.send
        #expect(send.retryQueue(afterRetries: 0, maximum: 10, atLeast: .seconds(900)) == "push.send.retry.15m")
        #expect(send.retryQueue(afterRetries: 10, maximum: 10, atLeast: .seconds(900)) == nil)
    }

    @Test func standardNamesMatchTheContract() {
        let names = PushQueues.standard
        #expect(names.exchange == "push")
        #expect(names.eventsExchange == "push.events")
        #expect(names.dead == "push.dead")
        #expect(names.workQueues.map(\.name) == ["push.requests", "push.registrations", "push.send", "push.feedback"])
        #expect(names.requests.routingKey == "request")
        #expect(names.registrations.routingKey == "registration")
    }

    @Test func aPrefixIsLettersDigitsDotsDashesAndUnderscores() {
        #expect(["push", "t1.send-a_b", "X9"].allSatisfy(PushQueues.isValidPrefix))
        #expect(!["", "no spaces", "é", "a/b", "a*"].contains(where: PushQueues.isValidPrefix))
    }

    @Test func anotherPrefixGivesASeparateSet() {
        let names = PushQueues(prefix: "t1")
        #expect(names.send.name == "t1.send")
        #expect(names.allQueueNames.allSatisfy { $0.hasPrefix("t1.") })
        #expect(Set(names.allQueueNames).count == names.allQueueNames.count)
    }
}
