import Testing

@testable import AMQP

/// The AMQP connection's channel and consumer decisions, without a broker.
@Suite("AMQP channel table")
struct ChannelTableTests {
    typealias Table = ChannelTable<String>

    @Test func consumersGetChannelsFromThreeUpInOrder() {
        var table = Table()
        table.add("a", id: 1)
        table.add("b", id: 2)
        #expect(table.nextFreeChannel() == 3)
        table.started(id: 1, channel: 3, tag: "t1")
        #expect(table.nextFreeChannel() == 4)
        table.started(id: 2, channel: 4, tag: "t2")
        #expect(table.consumer(onChannel: 3) == "a")
        #expect(table.consumer(onChannel: 4) == "b")
        #expect(table.consumer(onChannel: 5) == nil)
        #expect(Table.publishChannel == 1 && Table.adminChannel == 2)
    }

    @Test func aCancelledConsumersChannelStaysOpenAndIsNeverReusedInTheSession() {
        var table = Table()
        table.add("a", id: 1)
        table.started(id: 1, channel: 3, tag: "t1")
        guard case .cancelOnBroker(let consumer, let channel, let tag) = table.cancel(id: 1) else {
            Issue.record("a running consumer is cancelled on the broker")
            return
        }
        #expect(consumer == "a" && channel == 3 && tag == "t1")
        // Late deliveries on its channel reach nobody (they go back to the queue).
        #expect(table.consumer(onChannel: 3) == nil)
        table.add("b", id: 2)
        #expect(table.nextFreeChannel() == 4)
        guard case .unknown = table.cancel(id: 1) else {
            Issue.record("cancelling twice does nothing")
            return
        }
        // A new session starts from channel 3 again.
        table.connectionLost()
        #expect(table.nextFreeChannel() == 3)
    }

    @Test func aConsumerNotRunningOnTheBrokerIsOnlyFinished() {
        var table = Table()
        table.add("a", id: 1)
        guard case .finish("a") = table.cancel(id: 1) else {
            Issue.record("a consumer waiting for a connection is only finished")
            return
        }
        #expect(table.count == 0)
    }

    @Test func consumersOutliveTheConnectionAndStartAgainInOrder() {
        var table = Table()
        for (id, name) in [(5, "e"), (2, "b"), (9, "i")] as [(UInt64, String)] { table.add(name, id: id) }
        table.started(id: 2, channel: 3, tag: "t2")
        table.started(id: 5, channel: 4, tag: "t5")
        table.adminChannelOpened()
        table.connectionLost()
        #expect(table.consumersToStart.map(\.consumer) == ["b", "e", "i"])
        #expect(table.consumer(onChannel: 3) == nil)
        #expect(!table.adminChannelOpen)
        #expect(table.count == 3)
    }

    @Test func theBrokerClosingAChannelDecidesByWhatItCarried() {
        var table = Table()
        table.add("a", id: 1)
        table.started(id: 1, channel: 3, tag: "t1")
        table.adminChannelOpened()
        guard case .reopenPublishChannel = table.brokerClosed(channel: 1) else {
            Issue.record("the publish channel reopens")
            return
        }
        guard case .adminChannelClosed = table.brokerClosed(channel: 2) else {
            Issue.record("the admin channel reopens on next use")
            return
        }
        #expect(!table.adminChannelOpen)
        guard case .consumerFailed("a") = table.brokerClosed(channel: 3, replyCode: 404) else {
            Issue.record("a consumer whose queue is gone ends")
            return
        }
        #expect(table.count == 0)
        guard case .nothing = table.brokerClosed(channel: 3) else {
            Issue.record("a channel with nothing on it")
            return
        }
    }

    @Test func aConsumerWhoseChannelTheBrokerClosedForItsOwnReasonStartsAgainOnANewChannel() {
        var table = Table()
        table.add("a", id: 1)
        table.add("b", id: 2)
        table.started(id: 1, channel: 3, tag: "t1")
        table.started(id: 2, channel: 4, tag: "t2")
        // 406: an ack of an unknown delivery tag, or a consumer timeout.
        guard case .restartConsumer("a", id: 1) = table.brokerClosed(channel: 3, replyCode: 406) else {
            Issue.record("the consumer starts again")
            return
        }
        #expect(table.isClosedByBroker(3))
        #expect(table.consumer(onChannel: 3) == nil, "late deliveries on the closed channel go back")
        #expect(table.nextFreeChannel() == 5, "the closed channel is not reused in this session")
        table.started(id: 1, channel: 5, tag: "t1b")
        #expect(table.consumer(onChannel: 5) == "a")
        #expect(table.count == 2)
        // One that keeps closing ends after the bound, rather than looping.
        var channel: UInt16 = 5
        for _ in 1..<Table.maximumRestarts {
            guard case .restartConsumer = table.brokerClosed(channel: channel, replyCode: 406) else {
                Issue.record("restarts up to the bound")
                return
            }
            channel = table.nextFreeChannel()
            table.started(id: 1, channel: channel, tag: "t")
        }
        guard case .consumerFailed("a") = table.brokerClosed(channel: channel, replyCode: 406) else {
            Issue.record("the consumer ends once its restarts are used up")
            return
        }
        // A new session starts with every channel and restart count fresh.
        table.connectionLost()
        #expect(!table.isClosedByBroker(3))
        #expect(table.nextFreeChannel() == 3)
        #expect(table.consumersToStart.map(\.consumer) == ["b"])
        for code in [403, 405] {
            table.started(id: 2, channel: 3, tag: "t2")
            guard case .consumerFailed("b") = table.brokerClosed(channel: 3, replyCode: code) else {
                Issue.record("\(code) ends the consumer")
                return
            }
            table.add("b", id: 2)
            table.connectionLost()
        }
    }

    @Test func aBrokerCancelRemovesTheConsumerForGood() {
        var table = Table()
        table.add("a", id: 1)
        table.started(id: 1, channel: 3, tag: "t1")
        #expect(table.brokerCancelled(channel: 3) == "a")
        #expect(table.brokerCancelled(channel: 3) == nil)
        table.connectionLost()
        #expect(table.consumersToStart.isEmpty)
    }

    @Test func removeAllReturnsEachConsumerWithItsChannelAndTag() {
        var table = Table()
        table.add("a", id: 1)
        table.add("b", id: 2)
        table.started(id: 1, channel: 3, tag: "t1")
        let all = table.removeAll()
        #expect(all.map(\.consumer) == ["a", "b"])
        #expect(all[0].channel == 3 && all[0].tag == "t1")
        #expect(all[1].channel == nil && all[1].tag == nil)
        #expect(table.count == 0)
    }
}
