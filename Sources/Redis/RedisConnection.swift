import Foundation
import IOSupport
import Logging
import Synchronization

/// One connection to Redis, with its own OS thread.
///
/// Concurrent callers are pipelined together automatically: the thread sends everything queued in one
/// write and reads the replies in order (see ``RedisConnectionWorker``). The connection reconnects by
/// itself after Redis restarts; commands in flight when it breaks fail with a retryable error.
///
/// Call ``close()`` when done; it drains queued commands and joins the thread. Dropping the last
/// reference without closing also stops the thread, but without waiting for it.
public final class RedisConnection: RedisCommandExecutor {
    public let configuration: RedisConfiguration
    private let queue = RedisJobQueue()

    /// Starts the thread, which connects in the background at once; commands issued before the
    /// connection is up wait for it (up to their timeout). Use ``connect(configuration:logger:)`` to
    /// find out about a wrong address or password right away.
    public convenience init(configuration: RedisConfiguration, logger: Logger) {
        self.init(configuration: configuration, logger: logger, name: "redis")
    }

    init(configuration: RedisConfiguration, logger: Logger, name: String, firstJob: RedisJob? = nil) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "redis.endpoint"] = "\(configuration.endpoint)"
        logger[metadataKey: "redis.db"] = "\(configuration.database)"
        logger[metadataKey: "redis.connection"] = "\(name)"
        if let firstJob { _ = queue.enqueue(firstJob) }
        IOThread.start(name: "\(name) \(configuration.endpoint)") { [queue, logger] in
            RedisConnectionWorker(configuration: configuration, queue: queue, logger: logger).run()
        }
    }

    /// Opens a connection and returns once it is ready (`AUTH` and `SELECT` done), or throws
    /// ``RedisError/Code/connectionFailed`` / ``RedisError/Code/authenticationFailed`` within the
    /// connect timeout (plus the command timeout for the handshake).
    public static func connect(configuration: RedisConfiguration, logger: Logger) async throws(RedisError) -> RedisConnection {
        try await connect(configuration: configuration, logger: logger, name: "redis")
    }

    static func connect(configuration: RedisConfiguration, logger: Logger, name: String) async throws(RedisError) -> RedisConnection {
        let deadline = ContinuousClock.now + configuration.connectTimeout + configuration.commandTimeout
        var connection: RedisConnection?
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, RedisError>, Never>) in
            connection = RedisConnection(
                configuration: configuration,
                logger: logger,
                name: name,
                firstJob: RedisJob(kind: .connect(continuation), deadline: deadline)
            )
        }
        guard let connection else { preconditionFailure("withCheckedContinuation runs its body synchronously") }
        switch result {
        case .success: return connection
        case .failure(let error):
            await connection.close()
            throw error
        }
    }

    deinit {
        queue.requestClose()
    }

    /// Whether the connection is up right now (for readiness checks). A connection whose peer vanished
    /// without a word reads as connected until the next command notices.
    public var isConnected: Bool {
        queue.isConnected.load(ordering: .relaxed)
    }

    public func send(_ command: RedisCommand) async throws(RedisError) -> RedisReply {
        let deadline = ContinuousClock.now + configuration.commandTimeout
        return try await withCheckedContinuation { continuation in
            let job = RedisJob(kind: .single(command, continuation), deadline: deadline)
            if !queue.enqueue(job) { job.fail(.closed(configuration.endpoint)) }
        }.get()
    }

    public func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisReply] {
        if commands.isEmpty { return [] }
        let deadline = ContinuousClock.now + configuration.commandTimeout
        return try await withCheckedContinuation { continuation in
            let job = RedisJob(kind: .batch(commands, continuation), deadline: deadline)
            if !queue.enqueue(job) { job.fail(.closed(configuration.endpoint)) }
        }.get()
    }

    /// Stops accepting commands, lets the thread send those already queued (when connected), and
    /// returns once the thread has exited and the socket is closed. Later commands fail with
    /// ``RedisError/Code/closed``. Safe to call more than once.
    public func close() async {
        queue.requestClose()
        await queue.waitUntilFinished()
    }
}
