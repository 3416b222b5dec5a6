import Synchronization

/// One thing a service needs before it can do work (its broker, Redis), reported by `GET /readyz`.
///
/// The check is a closure, so this type knows nothing of AMQP or Redis: a connection exposes whether it
/// is up and the service wires `ReadinessCheck("amqp") { connection.isConnected ? .ready : .notReady(…) }`.
/// Checks should be cheap (read a state, not open a connection); one that takes longer than its
/// ``timeout`` counts as not ready.
public struct ReadinessCheck: Sendable {
    /// A check's answer.
    public enum Status: Sendable, Hashable {
        /// Ready; `/readyz` shows `"ok"`.
        case ready
        /// Not ready, with the reason `/readyz` shows, e.g. `connection refused (127.0.0.1:5672)`.
        case notReady(String)
    }

    /// The name `/readyz` lists the check under, e.g. `amqp`.
    public let name: String
    /// How long the check may take before it counts as not ready.
    public let timeout: Duration
    private let check: @Sendable () async -> Status

    /// - Parameters:
    ///   - name: The name `/readyz` lists the check under.
    ///   - timeout: How long the check may take (default 2 s).
    ///   - check: Answers whether the dependency is usable now; synchronous closures work too.
    public init(_ name: String, timeout: Duration = .seconds(2), check: @escaping @Sendable () async -> Status) {
        self.name = name
        self.timeout = timeout
        self.check = check
    }

    /// Runs the check, answering `.notReady("timed out after …")` if it takes longer than ``timeout``.
    ///
    /// A check that overruns keeps running in the background; its late answer is dropped.
    public func run() async -> Status {
        let check = self.check
        let timeout = self.timeout
        let answer = ReadinessAnswer()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Status, Never>) in
            answer.install(continuation)
            let timer = Task {
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled {
                    answer.resume(with: .notReady("timed out after \(timeout)"))
                }
            }
            Task {
                let status = await check()
                timer.cancel()
                answer.resume(with: status)
            }
        }
    }
}

/// The first answer of a check or its timer, handed to the waiting `/readyz` request exactly once.
private final class ReadinessAnswer: Sendable {
    private let continuation = Mutex<CheckedContinuation<ReadinessCheck.Status, Never>?>(nil)

    func install(_ continuation: CheckedContinuation<ReadinessCheck.Status, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(with status: ReadinessCheck.Status) {
        let waiting = continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(returning: status)
    }
}
