import Foundation
import IOSupport
import Logging

/// The I/O thread of one ``AMQPConnection``: connects, declares, publishes, consumes, reads frames
/// and reconnects. Everything here runs on that one thread; nothing else touches these fields.
final class ConnectionWorker: @unchecked Sendable {
    private let core: ConnectionCore
    private let configuration: AMQPConfiguration
    private let topology: AMQPTopology
    private let logger: Logger
    private let onBlocked: @Sendable (String?) -> Void

    /// Channel 1 publishes in confirm mode; channel 2 runs admin calls; consumers get 3 and up
    /// (``ChannelTable``).
    private static let publishChannel = ChannelTable<ConsumerSpec>.publishChannel
    private static let adminChannel = ChannelTable<ConsumerSpec>.adminChannel
    /// Header that carries a mandatory publish's sequence number, so a `basic.return` can be matched
    /// to the publish it belongs to.
    static let sequenceHeader = "x-publish-seq"

    private var session: RabbitSession?
    /// Which of the configuration's brokers to connect to next.
    private var rotation: BrokerRotation
    /// Incremented for every session; deliveries remember theirs so stale acks are dropped.
    private var generation: UInt64 = 0
    private var confirms = ConfirmTracker<PendingPublish>()
    /// Publishes not yet sent, oldest first (from `backlogHead`).
    private var backlog: [PendingPublish] = []
    private var backlogHead = 0
    private var channels = ChannelTable<ConsumerSpec>()
    private var inbound: [UInt16: InboundMessage] = [:]
    private var closing = false
    /// The broker nacked a publish on the publish channel: open a fresh one once every publish sent
    /// on it is settled (``recyclePublishChannelIfNacked()``).
    private var publishChannelNacked = false

    /// A message arriving in pieces: method, then header, then body frames.
    private struct InboundMessage {
        enum Kind {
            case delivery(tag: UInt64, redelivered: Bool)
            case returned(replyCode: Int, replyText: String)
        }
        var kind: Kind
        var exchange: String
        var routingKey: String
        var properties = AMQPProperties(contentType: nil, persistent: false)
        var bodySize: Int?
        var body: [UInt8] = []
    }

    init(
        core: ConnectionCore, configuration: AMQPConfiguration, topology: AMQPTopology, logger: Logger,
        onBlocked: @escaping @Sendable (String?) -> Void = { _ in }
    ) {
        self.core = core
        self.configuration = configuration
        self.topology = topology
        self.logger = logger
        self.onBlocked = onBlocked
        self.rotation = BrokerRotation(count: configuration.brokers.count)
    }

    // MARK: Main loop

    func main() {
        // Runs on an IOThread: SIGPIPE is blocked, so a write to a broker that went away is EPIPE
        // (rabbitmq-c sends with MSG_NOSIGNAL, but TLS writes go through OpenSSL).
        var attempt = 0
        while !closing {
            do throws(AMQPError) {
                try connect()
                attempt = 0
                try serve()
            } catch {
                disconnect(because: error)
                guard !closing else { break }
                rotation.moveOn()
                waitBeforeReconnecting(attempt: attempt)
                attempt += 1
            }
        }
        finish()
    }

    private func connect() throws(AMQPError) {
        generation += 1
        let session = try RabbitSession(configuration: configuration, broker: configuration.brokers[rotation.current])
        self.session = session
        try session.openChannel(Self.publishChannel)
        try session.declare(topology, on: Self.publishChannel)
        try session.enableConfirms(on: Self.publishChannel)
        for (id, spec) in channels.consumersToStart {
            try start(spec, id: id, on: session)
        }
        core.setConnected(generation: generation)
        core.setBroker(session.broker)
        logger.info("connected to the broker", metadata: ["amqp.consumers": "\(channels.count)", "amqp.broker": "\(session.broker)"])
    }

    /// Runs while connected; returns after a requested close, throws when the connection fails.
    private func serve() throws(AMQPError) {
        while true {
            try runCommands()
            if closing {
                try drainAndClose()
                return
            }
            try recyclePublishChannelIfNacked()
            try sendBacklog()
            expireBacklog()
            expireConfirms()
            try readFrames(mayWait: true)
        }
    }

    private func disconnect(because error: AMQPError) {
        let wasBlocked = core.blockedReason != nil
        core.setDisconnected(error)
        if wasBlocked { onBlocked(nil) }
        let broker = configuration.brokers[rotation.current]
        var metadata: Logger.Metadata = ["amqp.error": "\(error.message)", "amqp.broker": "\(broker)"]
        if configuration.brokers.count > 1 { metadata["amqp.next_broker"] = "\(configuration.brokers[rotation.following])" }
        if let session {
            logger.warning("broker connection lost; reconnecting", metadata: metadata)
            if error.code == .channelClosed || error.code == .protocolError { session.close() }
        } else if !closing {
            logger.warning("cannot connect to the broker", metadata: metadata)
        }
        session = nil
        let lost = AMQPError(
            .connectionLost,
            "the connection to \(configuration.endpointDescription(of: broker)) failed before the broker confirmed this publish (\(error.message))"
        )
        for pending in confirms.removeAll() { pending.complete(.failure(lost)) }
        publishChannelNacked = false
        inbound.removeAll()
        channels.connectionLost()
    }

    /// Sleeps per the backoff, still answering commands (publishes wait, stale acks are dropped).
    private func waitBeforeReconnecting(attempt: Int) {
        let deadline = ContinuousClock.now + configuration.reconnectBackoff.delay(afterFailures: attempt)
        while true {
            try? runCommands()
            expireBacklog()
            let now = ContinuousClock.now
            guard !closing else { return }
            guard now < deadline else { return }
            // Wake for the oldest waiting publish's deadline too, so its timeout is honoured.
            let wake = backlogHead < backlog.count ? min(deadline, backlog[backlogHead].deadline) : deadline
            core.wait(for: nil, timeout: max(wake - now, .milliseconds(1)))
        }
    }

    private func finish() {
        let closed = AMQPError(.closed, "the connection to \(configuration.endpointDescription) was closed")
        for pending in confirms.removeAll() { pending.complete(.failure(closed)) }
        for pending in backlog[backlogHead...] { pending.complete(.failure(closed)) }
        backlog.removeAll()
        backlogHead = 0
        for (spec, _, _) in channels.removeAll() { spec.continuation.finish() }
        for command in core.markClosed() { reject(command, with: closed) }
        logger.debug("connection thread finished")
    }

    // MARK: Commands

    private func runCommands() throws(AMQPError) {
        for command in core.takeCommands() {
            switch command {
            case .publish(let pendings):
                backlog.append(contentsOf: pendings)
            case .settle(let settlement, let generation, let channel, let tag, let multiple):
                guard let session, generation == self.generation else {
                    logger.debug("ignoring settlement of a delivery from an earlier connection", metadata: ["amqp.delivery_tag": "\(tag)"])
                    continue
                }
                guard !channels.isClosedByBroker(channel) else {
                    // Its channel is gone and its deliveries back in the queue: acking there would be
                    // a channel error that closes the whole connection.
                    logger.debug("ignoring settlement on a channel the broker closed", metadata: ["amqp.channel": "\(channel)"])
                    continue
                }
                switch settlement {
                case .ack: try session.ack(tag: tag, multiple: multiple, on: channel)
                case .nackRequeue: try session.nack(tag: tag, multiple: multiple, requeue: true, on: channel)
                case .nackDrop: try session.nack(tag: tag, multiple: multiple, requeue: false, on: channel)
                case .rejectRequeue: try session.reject(tag: tag, requeue: true, on: channel)
                case .rejectDrop: try session.reject(tag: tag, requeue: false, on: channel)
                }
            case .consume(let spec):
                channels.add(spec, id: spec.id)
                if let session { try start(spec, id: spec.id, on: session) }
            case .cancel(let id):
                switch channels.cancel(id: id) {
                case .unknown:
                    continue
                case .finish(let spec):
                    spec.continuation.finish()
                case .cancelOnBroker(let spec, let channel, let tag):
                    // The channel stays open so deliveries already handed out can still be acked.
                    if let session { try session.cancel(consumerTag: tag, on: channel) }
                    spec.continuation.finish()
                }
            case .admin(let admin):
                guard let session else {
                    admin.fail(
                        AMQPError(
                            .connectionLost,
                            "not connected to \(configuration.endpointDescription)" + (core.lastError.map { ": \($0.message)" } ?? "")))
                    continue
                }
                if !channels.adminChannelOpen {
                    try session.openChannel(Self.adminChannel)
                    channels.adminChannelOpened()
                }
                if let error = admin.run(session, Self.adminChannel) {
                    // A refused call closes only its channel (reopened on next use); anything else
                    // (lost connection, timeout, protocol error) leaves the session unusable.
                    guard error.code == .channelClosed else { throw error }
                    session.confirmChannelClose(Self.adminChannel)
                    _ = channels.brokerClosed(channel: Self.adminChannel)
                }
            case .close:
                closing = true
            }
        }
    }

    private func reject(_ command: Command, with error: AMQPError) {
        switch command {
        case .publish(let pendings): for pending in pendings { pending.complete(.failure(error)) }
        case .consume(let spec): spec.continuation.finish(throwing: error)
        case .admin(let admin): admin.fail(error)
        case .settle, .cancel, .close: break
        }
    }

    private func start(_ spec: ConsumerSpec, id: UInt64, on session: RabbitSession) throws(AMQPError) {
        let channel = channels.nextFreeChannel()
        try session.openChannel(channel)
        let tag = try session.consume(queue: spec.queue, prefetch: spec.prefetch, arguments: spec.arguments, on: channel)
        channels.started(id: id, channel: channel, tag: tag)
    }

    // MARK: Publishing

    /// Sends waiting publishes, unless the broker blocks this connection: then they wait (and fail at
    /// their deadline), since the broker would not read them anyway.
    private func sendBacklog() throws(AMQPError) {
        guard let session, core.blockedReason == nil, !publishChannelNacked else { return }
        while backlogHead < backlog.count, confirms.count < configuration.maxUnconfirmedPublishes {
            let pending = backlog[backlogHead]
            backlogHead += 1
            if let problem = pending.message.encodingProblem {
                pending.complete(.failure(AMQPError(.invalidMessage, "not published: \(problem)")))
                continue
            }
            let sequence = confirms.register(pending)
            let headers: AMQPTable = pending.message.mandatory ? [Self.sequenceHeader: .int64(Int64(sequence))] : [:]
            try session.publish(pending.message, extraHeaders: headers, on: Self.publishChannel)
        }
        if backlogHead == backlog.count {
            backlog.removeAll(keepingCapacity: backlog.count < 65_536)
            backlogHead = 0
        } else if backlogHead > 4096 {
            backlog.removeFirst(backlogHead)
            backlogHead = 0
        }
    }

    /// After a nack, replaces the publish channel by a fresh one as soon as nothing sent on it is
    /// waiting for its confirm. A nack means the broker could not store a publish, and RabbitMQ
    /// 3.10 can keep nacking every publish of that channel to a quorum queue whose leader died
    /// just before the channel's first publish there, even once a new leader serves it (measured:
    /// 60 s of nacks on one channel, while a new channel published at once). The cost is two round
    /// trips per nacked burst; publishes wait meanwhile.
    private func recyclePublishChannelIfNacked() throws(AMQPError) {
        guard publishChannelNacked, confirms.isEmpty, let session else { return }
        try session.closeChannel(Self.publishChannel)
        // Confirms the broker sent before its close-ok belong to the old channel's numbering: take
        // them (late ones of expired publishes are ignored) before numbering starts again at 1.
        while session.hasQueuedFrames, let frame = try session.nextFrame() {
            try handle(frame, session: session)
        }
        confirms = ConfirmTracker()
        publishChannelNacked = false
        try session.openChannel(Self.publishChannel)
        try session.enableConfirms(on: Self.publishChannel)
        logger.info("opened a new publish channel after the broker nacked a publish")
    }

    /// Fails publishes that could not be sent within the publish timeout (oldest are first).
    private func expireBacklog() {
        guard backlogHead < backlog.count else { return }
        let now = ContinuousClock.now
        while backlogHead < backlog.count, backlog[backlogHead].deadline <= now {
            let reason =
                core.blockedReason.map { ": the broker blocks publishing (\($0))" } ?? core.lastError.map { ": \($0.message)" }
                ?? " (too many unconfirmed publishes)"
            backlog[backlogHead].complete(.failure(AMQPError(.timeout, "not sent within \(configuration.publishTimeout)\(reason)")))
            backlogHead += 1
        }
    }

    /// Fails publishes the broker has not confirmed by their deadline: they count as unconfirmed
    /// (they may or may not be stored), so their callers take the republish path.
    private func expireConfirms() {
        let expired = confirms.expire(now: ContinuousClock.now)
        guard !expired.isEmpty else { return }
        let reason = core.blockedReason.map { " while the broker blocks publishing (\($0))" } ?? ""
        logger.warning("publishes not confirmed in time", metadata: ["amqp.unconfirmed": "\(expired.count)", "amqp.reason": "\(reason)"])
        let error = AMQPError(.timeout, "not confirmed within \(configuration.publishTimeout)\(reason); it may or may not have been stored")
        for pending in expired { pending.complete(.failure(error)) }
    }

    // MARK: Reading

    private func readFrames(mayWait: Bool) throws(AMQPError) {
        guard let session else { return }
        if mayWait, !session.hasBufferedInput {
            let canSendMore = backlogHead < backlog.count && confirms.count < configuration.maxUnconfirmedPublishes
            core.wait(for: session.socketDescriptor, timeout: canSendMore ? .zero : .milliseconds(250))
        }
        var handled = 0
        // Bounded so commands (acks, publishes) are not starved by a flood of deliveries.
        while handled < 8192, let frame = try session.nextFrame() {
            try handle(frame, session: session)
            handled += 1
        }
        session.releaseBuffers()
    }

    private func handle(_ frame: InboundFrame, session: RabbitSession) throws(AMQPError) {
        switch frame {
        case .basicAck(_, let tag, let multiple):
            for (pending, result) in confirms.settle(tag: tag, multiple: multiple, nack: false) { pending.complete(result) }
        case .basicNack(_, let tag, let multiple):
            for (pending, result) in confirms.settle(tag: tag, multiple: multiple, nack: true) { pending.complete(result) }
            publishChannelNacked = true
        case .basicReturn(let channel, let replyCode, let replyText, let exchange, let routingKey):
            inbound[channel] = InboundMessage(kind: .returned(replyCode: replyCode, replyText: replyText), exchange: exchange, routingKey: routingKey)
        case .basicDeliver(let channel, let tag, let redelivered, let exchange, let routingKey):
            inbound[channel] = InboundMessage(kind: .delivery(tag: tag, redelivered: redelivered), exchange: exchange, routingKey: routingKey)
        case .header(let channel, let bodySize, let properties):
            guard inbound[channel] != nil else { throw AMQPError(.protocolError, "content header without a method on channel \(channel)") }
            inbound[channel]!.properties = properties
            inbound[channel]!.bodySize = bodySize
            inbound[channel]!.body.reserveCapacity(bodySize)
            if bodySize == 0 { complete(channel: channel, session: session) }
        case .body(let channel, let bytes):
            guard let size = inbound[channel]?.bodySize else {
                throw AMQPError(.protocolError, "content body without a header on channel \(channel)")
            }
            inbound[channel]!.body.append(contentsOf: bytes)
            if inbound[channel]!.body.count >= size { complete(channel: channel, session: session) }
        case .basicCancel(let channel, _):
            if let spec = channels.brokerCancelled(channel: channel) {
                logger.error("the broker cancelled a consumer", metadata: ["amqp.queue": "\(spec.queue)"])
                spec.continuation.finish(
                    throwing: AMQPError(.channelClosed, "the broker cancelled the consumer of '\(spec.queue)' (was the queue deleted?)")
                )
            }
        case .channelClose(let channel, let replyCode, let replyText):
            session.confirmChannelClose(channel)
            try channelClosed(channel, replyCode: replyCode, replyText: replyText, session: session)
        case .connectionClose(let replyCode, let replyText):
            throw AMQPError(.connectionClosed, "the broker closed the connection: \(replyCode) \(replyText)", replyCode: replyCode)
        case .connectionBlocked(let reason):
            if core.setBlocked(reason) {
                logger.warning("the broker blocks publishing on this connection", metadata: ["amqp.reason": "\(reason)"])
                onBlocked(reason)
            }
        case .connectionUnblocked:
            if core.setBlocked(nil) {
                logger.info("the broker unblocked publishing")
                onBlocked(nil)
            }
        case .otherMethod, .heartbeat:
            break
        }
    }

    private func complete(channel: UInt16, session: RabbitSession) {
        guard let message = inbound.removeValue(forKey: channel) else { return }
        switch message.kind {
        case .returned(let replyCode, let replyText):
            guard let sequence = message.properties.headers[Self.sequenceHeader]?.intValue else { return }
            confirms.markReturned(
                sequence: UInt64(sequence),
                error: AMQPError(
                    .unroutable,
                    "no queue is bound to exchange '\(message.exchange)' with routing key '\(message.routingKey)' (\(replyCode) \(replyText))",
                    replyCode: replyCode
                )
            )
        case .delivery(let tag, let redelivered):
            var properties = message.properties
            properties.headers[Self.sequenceHeader] = nil
            guard let spec = channels.consumer(onChannel: channel) else {
                // Arrived after a cancel: give it back to the queue.
                try? session.nack(tag: tag, multiple: false, requeue: true, on: channel)
                return
            }
            spec.continuation.yield(
                AMQPDelivery(
                    body: message.body, properties: properties, exchange: message.exchange, routingKey: message.routingKey,
                    redelivered: redelivered, deliveryTag: tag, channel: channel, generation: generation, core: core
                )
            )
        }
    }

    private func channelClosed(_ channel: UInt16, replyCode: Int, replyText: String, session: RabbitSession) throws(AMQPError) {
        let error = AMQPError(.channelClosed, "the broker closed channel \(channel): \(replyCode) \(replyText)", replyCode: replyCode)
        inbound[channel] = nil
        switch channels.brokerClosed(channel: channel, replyCode: replyCode) {
        case .reopenPublishChannel:
            // Publishes after the failing one were discarded by the broker: report them all.
            logger.error("the broker closed the publish channel", metadata: ["amqp.error": "\(error.message)"])
            for pending in confirms.removeAll() {
                pending.complete(.failure(AMQPError(.channelClosed, "publish failed: \(replyCode) \(replyText)", replyCode: replyCode)))
            }
            try session.openChannel(Self.publishChannel)
            try session.enableConfirms(on: Self.publishChannel)
        case .adminChannelClosed, .nothing:
            break
        case .consumerFailed(let spec):
            core.channelDied(channel)
            logger.error("the broker closed a consumer's channel", metadata: ["amqp.queue": "\(spec.queue)", "amqp.error": "\(error.message)"])
            spec.continuation.finish(throwing: error)
        case .restartConsumer(let spec, let id):
            // E.g. an ack the broker refused (unknown delivery tag, consumer timeout): its deliveries
            // went back to the queue; the consumer goes on, on a new channel of this connection.
            core.channelDied(channel)
            logger.warning(
                "the broker closed a consumer's channel; consuming again on a new channel",
                metadata: ["amqp.queue": "\(spec.queue)", "amqp.error": "\(error.message)"])
            try start(spec, id: id, on: session)
        }
    }

    // MARK: Closing

    /// Cancels consumers, gives unconfirmed publishes a bounded time, then closes the connection.
    private func drainAndClose() throws(AMQPError) {
        guard let session else { return }
        for (spec, channel, tag) in channels.removeAll() {
            if let channel, let tag { try? session.cancel(consumerTag: tag, on: channel) }
            spec.continuation.finish()
        }
        let deadline = ContinuousClock.now + min(configuration.publishTimeout, .seconds(5))
        while !confirms.isEmpty || backlogHead < backlog.count, ContinuousClock.now < deadline {
            try runCommands()
            try sendBacklog()
            try readFrames(mayWait: true)
        }
        session.close()
        self.session = nil
        core.setDisconnected(AMQPError(.closed, "closed"))
        logger.info("disconnected from the broker")
    }
}
