import IOSupport
import Synchronization

/// One notification on its way: waiting in the queue, then in flight on a connection's stream, until
/// it completes exactly once (an answer, a timeout, a transport failure or shutdown).
final class PendingRequest: Sendable {
    let notification: APNsNotification
    /// Monotonic nanoseconds after which the caller gets ``APNsClientError/Code/timeout``.
    let deadline: UInt64
    /// When the caller handed it over (monotonic ns).
    let createdAt = monotonicNanoseconds()
    private let state: Mutex<State>

    /// Called exactly once with the result (``APNsClient/send(_:timeout:completion:)``).
    private let completion: @Sendable (Result<APNsResponse, APNsClientError>) -> Void

    private struct State {
        var completed = false
        /// Times the request went back to the queue unprocessed (GOAWAY, REFUSED_STREAM, a drop).
        var requeues = 0
        /// Whether it was already resent once after `ExpiredProviderToken`.
        var resentWithFreshToken = false
    }

    /// Past this many unprocessed requeues the request fails instead of circling forever.
    static let maximumRequeues = 10

    init(notification: APNsNotification, deadline: UInt64, completion: @escaping @Sendable (Result<APNsResponse, APNsClientError>) -> Void) {
        self.notification = notification
        self.deadline = deadline
        self.completion = completion
        state = Mutex(State())
    }

    var isCompleted: Bool { state.withLock { $0.completed } }

    /// Completes the request; later calls do nothing.
    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        let first = state.withLock { state -> Bool in
            defer { state.completed = true }
            return !state.completed
        }
        if first { completion(result) }
    }

    /// Counts an unprocessed requeue; false once the bound is reached.
    func noteRequeue() -> Bool {
        state.withLock { state in
            state.requeues += 1
            return state.requeues <= Self.maximumRequeues
        }
    }

    /// Claims the one resend after `ExpiredProviderToken`; false if it was used.
    func claimFreshTokenResend() -> Bool {
        state.withLock { state in
            guard !state.resentWithFreshToken else { return false }
            state.resentWithFreshToken = true
            return true
        }
    }
}
