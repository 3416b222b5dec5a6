import IOSupport
import Synchronization

/// One request on its way (a notification, a broadcast or a channel-management request): waiting in
/// the queue, then in flight on a connection's stream, until it completes exactly once (an answer, a
/// timeout, a transport failure or shutdown).
final class PendingRequest: Sendable {
    /// What goes on the wire.
    enum Message: Sendable {
        case notification(APNsNotification)
        case http(APNsHTTPRequest)
    }

    /// Who hears the result: notifications an ``APNsResponse``, broadcasts and channel requests the
    /// answer as it came (their callers read other headers and the body).
    enum Completion: Sendable {
        case notification(@Sendable (Result<APNsResponse, APNsClientError>) -> Void)
        case answer(@Sendable (Result<APNsAnswer, APNsClientError>) -> Void)
    }

    let message: Message
    /// The request body (the notification's payload); empty sends no DATA frame.
    let body: [UInt8]
    /// Bytes of the answer's body kept.
    let maximumAnswerBody: Int
    /// Monotonic nanoseconds after which the caller gets ``APNsClientError/Code/timeout``.
    let deadline: UInt64
    /// When the caller handed it over (monotonic ns).
    let createdAt = monotonicNanoseconds()
    private let state: Mutex<State>

    /// Called exactly once with the result (``APNsClient/send(_:timeout:completion:)``).
    private let completion: Completion

    private struct State {
        var completed = false
        /// Times the request went back to the queue unprocessed (GOAWAY, REFUSED_STREAM, a drop).
        var requeues = 0
        /// Whether it was already resent once after `ExpiredProviderToken`.
        var resentWithFreshToken = false
    }

    /// Past this many unprocessed requeues the request fails instead of circling forever.
    static let maximumRequeues = 10

    init(message: Message, deadline: UInt64, completion: Completion) {
        self.message = message
        switch message {
        case .notification(let notification):
            body = notification.payload
            maximumAnswerBody = APNsHTTPRequest.defaultMaximumAnswerBody
        case .http(let request):
            body = request.body
            maximumAnswerBody = request.maximumAnswerBody
        }
        self.deadline = deadline
        self.completion = completion
        state = Mutex(State())
    }

    /// The request headers, in the order they are sent (pseudo-headers first).
    func headerFields(authority: String, authorization: String?) -> [(name: String, value: String)] {
        switch message {
        case .notification(let notification): notification.headers(authority: authority, authorization: authorization)
        case .http(let request): request.headerFields(authority: authority, authorization: authorization)
        }
    }

    var isCompleted: Bool { state.withLock { $0.completed } }

    /// Completes the request; later calls do nothing.
    func complete(_ result: Result<APNsAnswer, APNsClientError>) {
        let first = state.withLock { state -> Bool in
            defer { state.completed = true }
            return !state.completed
        }
        guard first else { return }
        switch completion {
        case .notification(let completion): completion(result.map(APNsResponse.init(answer:)))
        case .answer(let completion): completion(result)
        }
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
