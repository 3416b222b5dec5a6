import Foundation
import IOSupport
import Logging
import ServiceLifecycle
import Synchronization

/// A connection to RabbitMQ that keeps itself connected: publish with confirms, consume with
/// prefetch, and the topology declared again after every reconnect.
///
/// All rabbitmq-c work happens on one dedicated I/O thread per connection (rabbitmq-c connections
/// are not thread-safe, and blocking C calls must stay off Swift's cooperative pool). Callers talk to
/// that thread through a command queue, so every method here is safe to call from any task.
///
/// Reliability promises:
/// - ``publish(_:)`` returns only after the broker confirmed the message; it throws when the broker
///   nacked it, returned it as unroutable, or the connection dropped first (`connectionLost`: it may or
///   may not have been stored). Nothing is dropped silently.
/// - After a connection loss the thread reconnects with ``ReconnectBackoff``, declares the topology
///   again and restarts every consumer; consumers keep iterating. Deliveries received before the loss
///   can no longer be acked (the broker redelivers them) and their acks are ignored.
/// - A publish is sent and confirmed within ``AMQPConfiguration/publishTimeout`` of the call, or it
///   fails (`timeout`; unconfirmed ones may or may not have been stored), also while the broker
///   blocks publishing (`connection.blocked`, a memory or disk alarm: nothing is sent then).
/// - With ``Publishing/separate`` publishes go over a second connection of their own, as RabbitMQ
///   advises: a broker that blocks publishers under an alarm stops reading their connection, acks
///   included, and only acks can free the memory a backlog holds.
public final class AMQPConnection: Service, Sendable {
    /// Whether publishes share the consumers' connection or have one of their own.
    public enum Publishing: Sendable {
        case shared
        case separate
    }

    public let configuration: AMQPConfiguration
    public let topology: AMQPTopology
    /// Consumers, acks and admin calls (and publishes, when shared).
    let core: ConnectionCore
    /// Publishes: ``core`` itself, or a connection of its own.
    let publishingCore: ConnectionCore
    private let logger: Logger
    private let onBlocked: @Sendable (String?) -> Void

    /// - Parameters:
    ///   - publishing: ``Publishing/separate`` opens a second connection for publishes, named
    ///     `<connection name> publisher`.
    ///   - onBlocked: called on the I/O thread when the broker blocks publishing (its reason) or
    ///     unblocks it (nil), e.g. to set a metric.
    public init(
        configuration: AMQPConfiguration, topology: AMQPTopology = .empty, logger: Logger, publishing: Publishing = .shared,
        onBlocked: @escaping @Sendable (String?) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.topology = topology
        var logger = logger
        logger[metadataKey: "amqp.connection"] = "\(configuration.connectionName)"
        logger[metadataKey: "amqp.endpoint"] = "\(configuration.endpointDescription)"
        self.logger = logger
        self.core = ConnectionCore()
        self.publishingCore = publishing == .separate ? ConnectionCore() : core
        self.onBlocked = onBlocked
    }

    /// Starts the I/O thread (two with a separate publisher), which connects in the background; idempotent.
    public func start() {
        guard core.claimStart() else { return }
        let worker = ConnectionWorker(core: core, configuration: configuration, topology: topology, logger: logger, onBlocked: onBlocked)
        IOThread.start(name: "amqp:\(configuration.connectionName)") { worker.main() }
        if publishingCore !== core, publishingCore.claimStart() {
            var configuration = configuration
            configuration.connectionName += " publisher"
            var logger = logger
            logger[metadataKey: "amqp.connection"] = "\(configuration.connectionName)"
            let publisher = ConnectionWorker(
                core: publishingCore, configuration: configuration, topology: topology, logger: logger, onBlocked: onBlocked)
            IOThread.start(name: "amqp:\(configuration.connectionName)") { publisher.main() }
        }
    }

    /// Runs until graceful shutdown (or cancellation), then closes: the `Service` entry point.
    public func run() async throws {
        start()
        try? await gracefulShutdown()
        await close()
    }

    /// Stops consumers, waits a bounded time for unconfirmed publishes, closes the connection and
    /// returns when the I/O thread has exited. Publishes still waiting fail with `closed`.
    public func close() async {
        guard core.hasStarted else { return }
        _ = core.enqueue(.close)
        if publishingCore !== core { _ = publishingCore.enqueue(.close) }
        await core.waitForExit()
        if publishingCore !== core { await publishingCore.waitForExit() }
    }

    /// Whether the connection (both, with a separate publisher) is up, its topology declared and its
    /// consumers started.
    public var isConnected: Bool { core.isConnected && publishingCore.isConnected }

    /// Why the last connection attempt failed or the last connection dropped, if it did.
    public var lastError: AMQPError? { core.lastError ?? (publishingCore !== core ? publishingCore.lastError : nil) }

    /// The broker's reason while it blocks publishing (`connection.blocked`: a memory or disk alarm);
    /// nil when publishing flows.
    public var blockedReason: String? { publishingCore.blockedReason }

    /// The broker of the cluster the (consuming) connection uses now, or used last; nil before the
    /// first connection.
    public var connectedBroker: AMQPBroker? { core.broker }

    /// Waits until connected; throws the last connection error (e.g. refused login) after `timeout`.
    public func waitUntilConnected(timeout: Duration) async throws(AMQPError) {
        start()
        let deadline = ContinuousClock.now + timeout
        while !isConnected {
            if core.isClosed { throw AMQPError(.closed, "the connection was closed") }
            // Refused credentials or a bad certificate will not fix themselves: say so now.
            if let error = lastError, !error.isRetryable { throw error }
            guard ContinuousClock.now < deadline else {
                throw lastError ?? AMQPError(.timeout, "not connected to \(configuration.endpointDescription) within \(timeout)")
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: Publishing

    /// Publishes one message and returns once the broker confirmed it.
    public func publish(_ message: AMQPOutboundMessage) async throws(AMQPError) {
        start()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, AMQPError>, Never>) in
            let pending = PendingPublish(message: message, deadline: .now + configuration.publishTimeout) { continuation.resume(returning: $0) }
            if !publishingCore.enqueue(.publish([pending])) {
                continuation.resume(returning: .failure(AMQPError(.closed, "the connection was closed")))
            }
        }
        try result.get()
    }

    /// Publishes many messages at once (kept in flight together) and returns each one's outcome, in
    /// order, once every one is confirmed or failed.
    public func publish(_ messages: [AMQPOutboundMessage]) async -> [Result<Void, AMQPError>] {
        guard !messages.isEmpty else { return [] }
        start()
        return await withCheckedContinuation { (continuation: CheckedContinuation<[Result<Void, AMQPError>], Never>) in
            let collector = BatchCollector(count: messages.count, continuation: continuation)
            let deadline = ContinuousClock.now + configuration.publishTimeout
            let pendings = messages.enumerated().map { index, message in
                PendingPublish(message: message, deadline: deadline) { collector.record(index, $0) }
            }
            if !publishingCore.enqueue(.publish(pendings)) {
                for index in messages.indices { collector.record(index, .failure(AMQPError(.closed, "the connection was closed"))) }
            }
        }
    }

    // MARK: Consuming

    /// Starts consuming `queue` with at most `prefetch` unacknowledged deliveries in flight.
    ///
    /// The sequence survives reconnects and ends when the consumer is cancelled, the connection is
    /// closed, or the broker cancels it (queue deleted), in which case it throws.
    public func consume(queue: String, prefetch: UInt16, arguments: AMQPTable = [:]) -> AMQPConsumer {
        start()
        let id = core.nextConsumerID()
        let (stream, continuation) = AsyncThrowingStream<AMQPDelivery, any Error>.makeStream()
        let core = self.core
        continuation.onTermination = { termination in
            if case .cancelled = termination { _ = core.enqueue(.cancel(consumer: id)) }
        }
        let spec = ConsumerSpec(id: id, queue: queue, prefetch: prefetch, arguments: arguments, continuation: continuation)
        if !core.enqueue(.consume(spec)) {
            continuation.finish(throwing: AMQPError(.closed, "the connection was closed"))
        }
        return AMQPConsumer(stream: stream, id: id, core: core, queue: queue)
    }

    // MARK: Queue administration (operator tools and tests)

    /// Messages ready in `queue` and its consumer count; throws `channelClosed` (404) if it does not exist.
    public func queueStatus(_ queue: String) async throws(AMQPError) -> (messages: Int, consumers: Int) {
        let result: (messages: UInt32, consumers: UInt32) = try await admin { session, channel throws(AMQPError) in
            try session.inspectQueue(queue, on: channel)
        }
        return (Int(result.messages), Int(result.consumers))
    }

    /// Deletes `queue` with its messages; returns how many messages it held.
    @discardableResult
    public func deleteQueue(_ queue: String) async throws(AMQPError) -> Int {
        Int(try await admin { session, channel throws(AMQPError) in try session.deleteQueue(queue, on: channel) })
    }

    /// Declares extra exchanges, queues and bindings now (they are not redeclared on reconnect).
    public func declare(_ extra: AMQPTopology) async throws(AMQPError) {
        try await admin { session, channel throws(AMQPError) in try session.declare(extra, on: channel) }
    }

    private func admin<T: Sendable>(_ operation: @escaping @Sendable (RabbitSession, UInt16) throws(AMQPError) -> T) async throws(AMQPError) -> T {
        start()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, AMQPError>, Never>) in
            let command = AdminCommand { session, channel in
                do throws(AMQPError) {
                    continuation.resume(returning: .success(try operation(session, channel)))
                    return nil
                } catch {
                    continuation.resume(returning: .failure(error))
                    return error
                }
            } fail: { error in
                continuation.resume(returning: .failure(error))
            }
            if !core.enqueue(.admin(command)) {
                continuation.resume(returning: .failure(AMQPError(.closed, "the connection was closed")))
            }
        }
        return try result.get()
    }
}

/// Collects the outcomes of a batch publish; completions arrive on the I/O thread.
private final class BatchCollector: Sendable {
    private let state: Mutex<(results: [Result<Void, AMQPError>?], remaining: Int)>
    private let continuation: CheckedContinuation<[Result<Void, AMQPError>], Never>

    init(count: Int, continuation: CheckedContinuation<[Result<Void, AMQPError>], Never>) {
        self.state = Mutex((Array(repeating: nil, count: count), count))
        self.continuation = continuation
    }

    func record(_ index: Int, _ result: Result<Void, AMQPError>) {
        let finished: [Result<Void, AMQPError>]? = state.withLock { state in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            return state.remaining == 0 ? state.results.map { $0! } : nil
        }
        if let finished { continuation.resume(returning: finished) }
    }
}
