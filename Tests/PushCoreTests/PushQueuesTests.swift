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

    @Test func anotherPrefixGivesASeparateSet() {
        let names = PushQueues(prefix: "t1")
        #expect(names.send.name == "t1.send")
        #expect(names.allQueueNames.allSatisfy { $0.hasPrefix("t1.") })
        #expect(Set(names.allQueueNames).count == names.allQueueNames.count)
    }
}
