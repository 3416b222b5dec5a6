/// Which channel does what on one AMQP connection, and which consumer each channel carries: the
/// decisions of ``ConnectionWorker`` about channels and consumers, as a value tested without a broker.
///
/// Channel 1 publishes in confirm mode, channel 2 runs admin calls (opened on first use), consumers
/// get 3 and up. A cancelled consumer's channel stays open for the rest of the session so deliveries
/// already handed out can still be settled, and is never reused in that session: opening it again is
/// a broker `CHANNEL_ERROR`, and late deliveries of the old consumer must not reach a new one.
/// Consumers outlive connections: after a reconnect each is started again, in the order it was added.
struct ChannelTable<Consumer> {
    static var publishChannel: UInt16 { 1 }
    static var adminChannel: UInt16 { 2 }
    static var firstConsumerChannel: UInt16 { 3 }

    private struct Entry {
        let consumer: Consumer
        var channel: UInt16?
        var tag: String?
    }

    private var entries: [UInt64: Entry] = [:]
    private var idByChannel: [UInt16: UInt64] = [:]
    private var cancelledChannels: Set<UInt16> = []
    /// Consumer channels the broker closed in this session: never reused, nothing to settle there.
    private var brokerClosedChannels: Set<UInt16> = []
    /// Consumers restarted after the broker closed their channel, this session.
    private var restarts: [UInt64: Int] = [:]
    /// Restarts of one consumer in one session before its channel closing counts as a failure (a
    /// consume the broker keeps refusing would otherwise loop).
    static var maximumRestarts: Int { 5 }
    /// The admin channel is open in this session.
    private(set) var adminChannelOpen = false

    /// Consumers registered (started or waiting for a connection).
    var count: Int { entries.count }

    // MARK: Consumers

    /// A new consumer, started now if connected (``nextFreeChannel()``), else at the next connect.
    mutating func add(_ consumer: Consumer, id: UInt64) {
        entries[id] = Entry(consumer: consumer)
    }

    /// Consumers to start on a new session, in the order they were added.
    var consumersToStart: [(id: UInt64, consumer: Consumer)] {
        entries.sorted { $0.key < $1.key }.map { ($0.key, $0.value.consumer) }
    }

    /// The lowest consumer channel neither in use nor cancelled in this session.
    func nextFreeChannel() -> UInt16 {
        var channel = Self.firstConsumerChannel
        while idByChannel[channel] != nil || cancelledChannels.contains(channel) || brokerClosedChannels.contains(channel) { channel += 1 }
        return channel
    }

    /// The consumer `id` now runs on `channel` with the broker's `tag`.
    mutating func started(id: UInt64, channel: UInt16, tag: String) {
        guard entries[id] != nil else { return }
        entries[id]!.channel = channel
        entries[id]!.tag = tag
        idByChannel[channel] = id
    }

    enum Cancellation {
        /// Not registered (already cancelled or failed).
        case unknown
        /// Not running on the broker: only finish its stream.
        case finish(Consumer)
        /// Send `basic.cancel` with `tag` on `channel` (which stays open), then finish.
        case cancelOnBroker(Consumer, channel: UInt16, tag: String)
    }

    /// The application cancelled consumer `id`.
    mutating func cancel(id: UInt64) -> Cancellation {
        guard let entry = entries.removeValue(forKey: id) else { return .unknown }
        guard let channel = entry.channel, let tag = entry.tag else { return .finish(entry.consumer) }
        idByChannel[channel] = nil
        cancelledChannels.insert(channel)
        return .cancelOnBroker(entry.consumer, channel: channel, tag: tag)
    }

    /// The consumer a delivery on `channel` belongs to; nil after a cancel (give it back to the queue).
    func consumer(onChannel channel: UInt16) -> Consumer? {
        guard let id = idByChannel[channel] else { return nil }
        return entries[id]?.consumer
    }

    /// The broker cancelled the consumer on `channel` (its queue was deleted): removed for good.
    mutating func brokerCancelled(channel: UInt16) -> Consumer? {
        guard let id = idByChannel.removeValue(forKey: channel) else { return nil }
        return entries.removeValue(forKey: id)?.consumer
    }

    // MARK: Channels

    enum ChannelClosing {
        /// Publishes in flight were discarded: fail them all, reopen the channel in confirm mode.
        case reopenPublishChannel
        /// The admin channel reopens on its next use.
        case adminChannelClosed
        /// A consumer's channel, for good (its queue is gone or refused, or it keeps closing): the
        /// consumer ends with the error.
        case consumerFailed(Consumer)
        /// A consumer's channel, for a reason of the channel's own (an ack the broker refused, a
        /// consumer timeout): start consumer `id` again on a new channel (``nextFreeChannel()``).
        case restartConsumer(Consumer, id: UInt64)
        /// A channel with nothing on it any more (a cancelled consumer's).
        case nothing
    }

    /// The broker closed `channel` with `replyCode` (AMQP: 403 access refused, 404 not found and 405
    /// resource locked concern the queue itself; others, such as 406 precondition failed for an
    /// unknown delivery tag or a consumer timeout, concern the channel).
    mutating func brokerClosed(channel: UInt16, replyCode: Int = 0) -> ChannelClosing {
        switch channel {
        case Self.publishChannel:
            return .reopenPublishChannel
        case Self.adminChannel:
            adminChannelOpen = false
            return .adminChannelClosed
        default:
            guard let id = idByChannel.removeValue(forKey: channel), let entry = entries[id] else { return .nothing }
            brokerClosedChannels.insert(channel)
            let restarted = restarts[id, default: 0]
            if [403, 404, 405].contains(replyCode) || restarted >= Self.maximumRestarts {
                entries[id] = nil
                return .consumerFailed(entry.consumer)
            }
            restarts[id] = restarted + 1
            entries[id]!.channel = nil
            entries[id]!.tag = nil
            return .restartConsumer(entry.consumer, id: id)
        }
    }

    /// Whether the broker closed consumer channel `channel` in this session (nothing may be sent on it).
    func isClosedByBroker(_ channel: UInt16) -> Bool {
        brokerClosedChannels.contains(channel)
    }

    /// The admin channel was opened.
    mutating func adminChannelOpened() {
        adminChannelOpen = true
    }

    /// The connection is gone: no channel survives it, every consumer waits to start again.
    mutating func connectionLost() {
        idByChannel.removeAll()
        cancelledChannels.removeAll()
        brokerClosedChannels.removeAll()
        restarts.removeAll()
        adminChannelOpen = false
        for id in entries.keys {
            entries[id]!.channel = nil
            entries[id]!.tag = nil
        }
    }

    /// Closing: every consumer, with its channel and tag when it runs on the broker.
    mutating func removeAll() -> [(consumer: Consumer, channel: UInt16?, tag: String?)] {
        let all = entries.sorted { $0.key < $1.key }.map { ($0.value.consumer, $0.value.channel, $0.value.tag) }
        entries.removeAll()
        idByChannel.removeAll()
        return all
    }
}
