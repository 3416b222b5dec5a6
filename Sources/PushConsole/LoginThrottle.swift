import Crypto
import Foundation
import Redis
import Synchronization

/// How fast logins may be tried, so that guessing is slow and nobody can keep an operator out:
///
/// - **Per client address**, before any password is checked: at most ``attemptsPerAddress`` tries a
///   minute. A flood of made-up names from one address costs one Redis round trip each, not a
///   PBKDF2.
/// - **Per name and address**: after ``freeFailures`` failures, each further try must wait
///   ``backoff(failures:)`` after the last failure (1 s, doubling, at most ``maximumBackoff``); a
///   success clears it. Keyed by the address too, so someone guessing `alice`'s password elsewhere
///   never holds `alice` back; behind a proxy that is true only when the proxy is trusted
///   (`PUSH_CONSOLE_TRUSTED_PROXIES`), else every client shares its address.
///
/// State lives in Redis (every replica sees it) under `{prefix}:console:login:…`, keys made of a
/// SHA-256 of what they count, so a name of any bytes makes a key of fixed size. Without Redis,
/// logins fail closed.
struct LoginThrottle: Sendable {
    let redis: any RedisCommandExecutor
    let keyPrefix: String

    static let attemptsPerAddress = 30
    static let addressWindow: Duration = .seconds(60)
    static let freeFailures = 5
    static let maximumBackoff: Duration = .seconds(60)
    /// How long failures are remembered after the last one.
    static let failureMemory: Duration = .seconds(3600)

    /// Why a try is refused before its password is checked.
    enum Refusal: Equatable {
        case addressBudget(retryAfter: Duration)
        case backoff(retryAfter: Duration)
    }

    /// The wait after `failures` failures: none below ``freeFailures``, then 1 s doubling to ``maximumBackoff``.
    static func backoff(failures: Int) -> Duration {
        guard failures >= freeFailures else { return .zero }
        let exponent = min(failures - freeFailures, 16)
        return min(.seconds(1 << exponent), maximumBackoff)
    }

    /// Whether a try at `now` (ms) may go on after `failures` failures, the last at `lastFailure` (ms).
    static func backoffRefusal(failures: Int, lastFailure: Int64, now: Int64) -> Refusal? {
        let wait = backoff(failures: failures)
        let waitMilliseconds = wait.components.seconds * 1000
        // `lastFailure` comes from Redis: any Int64, so the difference must not trap.
        let (elapsed, overflow) = now.subtractingReportingOverflow(lastFailure)
        guard wait > .zero, !overflow, elapsed >= 0, elapsed < waitMilliseconds else { return nil }
        return .backoff(retryAfter: .milliseconds(waitMilliseconds - elapsed))
    }

    func addressKey(_ address: String) -> String { "\(keyPrefix):console:login:address:\(Self.digest(address))" }
    func failuresKey(name: String, address: String) -> String { "\(keyPrefix):console:login:failures:\(Self.digest("\(address)\n\(name)"))" }

    private static func digest(_ text: String) -> String {
        SHA256.hash(data: Array(text.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// Counts the try against the address and reads the name's failures: one round trip. Nil when the
    /// password may be checked.
    func admit(name: String, address: String, now: Int64) async throws(RedisError) -> Refusal? {
        let addressKey = addressKey(address)
        var expire: RedisCommand = ["EXPIRE", addressKey]
        expire.append(Self.addressWindow.components.seconds)
        expire.append("NX")
        let replies = try await redis.pipeline([
            RedisCommand(["INCR", addressKey]), expire, RedisCommand(["TTL", addressKey]),
            RedisCommand(["HMGET", failuresKey(name: name, address: address), "failures", "last"]),
        ])
        let attempts = replies[0].integer ?? 0
        if attempts > Int64(Self.attemptsPerAddress) {
            let ttl = max(1, replies[2].integer ?? Self.addressWindow.components.seconds)
            return .addressBudget(retryAfter: .seconds(ttl))
        }
        let fields = replies[3].array ?? []
        let failures = fields.first.flatMap { $0.string.flatMap { Int($0) } } ?? 0
        let last = fields.dropFirst().first.flatMap { $0.string.flatMap { Int64($0) } } ?? 0
        return Self.backoffRefusal(failures: failures, lastFailure: last, now: now)
    }

    func failed(name: String, address: String, now: Int64) async throws(RedisError) {
        let key = failuresKey(name: name, address: address)
        var expire: RedisCommand = ["EXPIRE", key]
        expire.append(Self.failureMemory.components.seconds)
        var last: RedisCommand = ["HSET", key, "last"]
        last.append(now)
        _ = try await redis.pipeline([RedisCommand(["HINCRBY", key, "failures", "1"]), last, expire])
    }

    func succeeded(name: String, address: String) async throws(RedisError) {
        _ = try await redis.execute(RedisCommand(["DEL", failuresKey(name: name, address: address)]))
    }
}

/// Password checks (PBKDF2, about 0.1–0.3 s of a core each): at most `concurrent` at once, and up to
/// `waiting` more wait their turn for at most `patience` before they are told the console is busy. A
/// short line rather than an instant `429`, so a burst does not turn a real operator away.
final class VerificationQueue: Sendable {
    private struct State {
        var running = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID: UInt64 = 0
        /// Recent checks' mean duration (exponentially weighted), in nanoseconds.
        var meanNanoseconds: Int64 = 0
    }

    private let state: Mutex<State>
    let concurrent: Int
    let waiting: Int
    let patience: Duration

    init(concurrent: Int = 2, waiting: Int = 64, patience: Duration = .seconds(5)) {
        self.concurrent = concurrent
        self.waiting = waiting
        self.patience = patience
        state = Mutex(State())
    }

    /// How long a recent check took: the time an unknown name waits instead of a check of its own,
    /// so the answer's timing does not tell which names exist (when nothing waits in line).
    var typicalCheck: Duration { .nanoseconds(state.withLock { $0.meanNanoseconds }) }

    /// Runs `check` when a slot is free; nil when the line is full or the turn did not come in time.
    func run<Result>(_ check: () -> Result) async -> Result? {
        guard await enter() else { return nil }
        let start = ContinuousClock.now
        let result = check()
        let took = ContinuousClock.now - start
        leave(took: took)
        return result
    }

    private func enter() async -> Bool {
        enum Entry {
            case admitted
            case refused
            case wait(UInt64)
        }
        let entry = state.withLock { state -> Entry in
            if state.running < concurrent {
                state.running += 1
                return .admitted
            }
            guard state.waiters.count < waiting else { return .refused }
            state.nextID += 1
            return .wait(state.nextID)
        }
        switch entry {
        case .admitted: return true
        case .refused: return false
        case .wait(let id):
            let timeout = Task { [patience] in
                try? await Task.sleep(for: patience)
                self.giveUp(id)
            }
            defer { timeout.cancel() }
            return await withCheckedContinuation { continuation in
                let admittedAlready = state.withLock { state -> Bool in
                    // A slot may have freed between the first look and now.
                    if state.running < concurrent {
                        state.running += 1
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return false
                }
                if admittedAlready { continuation.resume(returning: true) }
            }
        }
    }

    /// The waiter `id` stops waiting (its patience ran out), if it still waits.
    private func giveUp(_ id: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        continuation?.resume(returning: false)
    }

    private func leave(took: Duration) {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            let nanoseconds = took.components.seconds * 1_000_000_000 + took.components.attoseconds / 1_000_000_000
            state.meanNanoseconds = state.meanNanoseconds == 0 ? nanoseconds : (state.meanNanoseconds * 7 + nanoseconds) / 8
            // The slot passes straight to the first waiter, so nobody can overtake the line.
            guard !state.waiters.isEmpty else {
                state.running -= 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }
}
