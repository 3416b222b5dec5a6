import Foundation
import Glibc
import IOSupport
import Logging
import Synchronization

/// The body of one connection's thread: owns the hiredis context and runs every blocking call.
///
/// Blocking hiredis calls must never run on Swift concurrency's cooperative pool (two threads on this
/// machine: one slow Redis would stall every task), so each connection has this dedicated OS thread.
/// Each turn of the loop takes every queued job, appends all their commands (`redisAppendCommandArgv`),
/// then reads the replies in order (`redisGetReply`): callers that arrive together share one write and
/// one round trip.
///
/// When the connection breaks, the jobs in flight fail with a retryable error (``RedisError/Code/connectionLost``
/// or ``RedisError/Code/timeout``) — never retried behind the caller's back, since they may have run.
/// The thread then reconnects in the background per ``ReconnectSchedule``; jobs that arrive meanwhile
/// wait for the reconnection until their deadline (the command timeout) and then fail with the last
/// connection error, which names `host:port` and the cause.
final class RedisConnectionWorker {
    private let configuration: RedisConfiguration
    private let queue: RedisJobQueue
    private var logger: Logger
    private var context: HiredisContext?
    private var schedule: ReconnectSchedule
    private var random = SystemRandomNumberGenerator()
    /// Why the last connection attempt failed, for jobs that time out waiting for a connection.
    private var lastConnectError: RedisError?
    /// Whether a connection has ever been made (to word log lines: "connected" vs "reconnected").
    private var hasConnected = false

    init(configuration: RedisConfiguration, queue: RedisJobQueue, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.logger = logger
        self.schedule = ReconnectSchedule(backoff: configuration.reconnectBackoff, now: .now)
    }

    func run() {
        // Runs on an IOThread: SIGPIPE is blocked, so a write (hiredis uses write(2)) to a Redis
        // that went away is EPIPE, not the end of the process.
        var pending: [RedisJob] = []
        while true {
            let wakeAt: ContinuousClock.Instant? =
                context == nil ? pending.reduce(schedule.nextAttempt) { min($0, $1.deadline) } : nil
            let closing = queue.take(into: &pending, waitingUntil: wakeAt)

            if context == nil && !closing {
                if pending.contains(where: \.isConnect) || ContinuousClock.now >= schedule.nextAttempt {
                    connect(resolving: &pending)
                }
                if context == nil {
                    failExpired(&pending)
                    continue
                }
            }
            if context != nil {
                process(&pending)
            }
            if closing {
                for job in pending { job.fail(.closed(configuration.endpoint)) }
                break
            }
        }
        context = nil
        queue.isConnected.store(false, ordering: .relaxed)
        logger.debug("redis connection thread finished")
        queue.markFinished()
    }

    // MARK: Connecting

    /// One attempt: TCP connect, then `AUTH` and `SELECT` (or `PING`, so a server that needs a password
    /// says so now rather than on the first command). Resolves every `.connect` job in `pending`.
    private func connect(resolving pending: inout [RedisJob]) {
        let result: Result<HiredisContext, RedisError>
        do throws(RedisError) {
            let context = try HiredisContext(
                endpoint: configuration.endpoint,
                connectTimeout: configuration.connectTimeout,
                commandTimeout: configuration.commandTimeout
            )
            try handshake(context)
            result = .success(context)
        } catch {
            result = .failure(error)
        }

        switch result {
        case .success(let context):
            self.context = context
            schedule.connected()
            lastConnectError = nil
            queue.isConnected.store(true, ordering: .relaxed)
            logger.info(hasConnected ? "redis reconnected" : "redis connected")
            hasConnected = true
            pending.removeAll { job in
                guard case .connect(let continuation) = job.kind else { return false }
                continuation.resume(returning: .success(()))
                return true
            }
        case .failure(let error):
            lastConnectError = error
            let delay = schedule.attemptFailed(at: .now, using: &random)
            logger.log(
                level: schedule.failures == 1 ? .warning : .debug,
                "redis connection attempt failed",
                metadata: [
                    "redis.error": "\(error.message)",
                    "redis.attempt": "\(schedule.failures)",
                    "redis.retry_in_ms": "\(delay.milliseconds)",
                ]
            )
            // A refused password or a bad database will not fix itself within a command timeout: fail
            // everything now rather than make callers wait. Connection errors keep jobs waiting.
            pending.removeAll { job in
                guard job.isConnect || !error.isRetryable else { return false }
                job.fail(error)
                return true
            }
        }
    }

    private func handshake(_ context: HiredisContext) throws(RedisError) {
        let endpoint = configuration.endpoint
        if let password = configuration.password {
            var auth: RedisCommand = ["AUTH"]
            if let username = configuration.username { auth.append(username) }
            auth.append(password)
            if case .error(let message) = try context.roundTrip(auth) {
                let user = configuration.username.map { "user '\($0)'" } ?? "the default user"
                throw RedisError.authenticationFailed(endpoint, "AUTH as \(user) failed: \(message)")
            }
        }
        // After a successful AUTH on db 0 there is nothing left to check.
        if configuration.database == 0 && configuration.password != nil { return }
        let check: RedisCommand =
            configuration.database != 0 ? ["SELECT", String(configuration.database)] : ["PING"]
        if case .error(let message) = try context.roundTrip(check) {
            if message.hasPrefix("NOAUTH") {
                throw RedisError.authenticationFailed(
                    endpoint, "the server requires a password (\(message)); give one as redis://:PASSWORD@host")
            }
            throw RedisError.connectionFailed(endpoint, cause: "\(check.name) failed: \(message)")
        }
    }

    /// Fails the jobs whose wait for a connection is over.
    private func failExpired(_ pending: inout [RedisJob]) {
        let now = ContinuousClock.now
        pending.removeAll { job in
            guard job.deadline <= now else { return false }
            job.fail(lastConnectError ?? .connectionFailed(configuration.endpoint, cause: "not connected yet"))
            return true
        }
    }

    // MARK: Sending

    /// Sends every command of every job in one pipelined write, then reads the replies in order.
    /// Empties `pending`.
    private func process(_ pending: inout [RedisJob]) {
        guard let context else { return }
        defer { pending.removeAll(keepingCapacity: true) }

        var failure: RedisError?
        appending: for job in pending {
            do throws(RedisError) {
                switch job.kind {
                case .single(let command, _):
                    if command.count > 0 { try context.append(command) }
                case .batch(let commands, _):
                    for command in commands where command.count > 0 { try context.append(command) }
                case .connect:
                    break
                }
            } catch {
                failure = error
                break appending
            }
        }

        for job in pending {
            if let failure {
                job.fail(failure)
                continue
            }
            do throws(RedisError) {
                switch job.kind {
                case .single(let command, let continuation):
                    continuation.resume(returning: .success(try reply(to: command, from: context)))
                case .batch(let commands, let continuation):
                    var replies: [RedisReply] = []
                    replies.reserveCapacity(commands.count)
                    for command in commands { replies.append(try reply(to: command, from: context)) }
                    continuation.resume(returning: .success(replies))
                case .connect(let continuation):
                    continuation.resume(returning: .success(()))
                }
            } catch {
                failure = error
                job.fail(error)
            }
        }

        if let failure {
            // hiredis contexts are unusable after an error, and replies still on the wire would be
            // matched to the wrong commands: drop the connection and start over.
            self.context = nil
            queue.isConnected.store(false, ordering: .relaxed)
            schedule.connectionLost(at: .now)
            logger.warning("redis connection lost", metadata: ["redis.error": "\(failure.message)"])
        }
    }

    /// The next reply, or for an empty command (never sent: Redis silently ignores `*0`, so the
    /// reply would never come) an error reply made here.
    private func reply(to command: RedisCommand, from context: HiredisContext) throws(RedisError) -> RedisReply {
        command.count > 0 ? try context.readReply() : .error("ERR empty command (not sent)")
    }
}
