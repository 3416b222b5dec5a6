import Synchronization

/// Collects APNs' answers for one batch's tokens, sent concurrently, and lets the batch stop waiting
/// when its task is cancelled (shutdown past the drain timeout): ``wait()`` then returns what arrived so
/// far, and the requests still in flight finish on their own (the client bounds them).
final class AnswerCollector: Sendable {
    private struct State {
        var outcomes: [TokenOutcome?]
        var remaining: Int
        var isFinished = false
        var wasAbandoned = false
        var continuation: CheckedContinuation<[TokenOutcome?], Never>?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(outcomes: Array(repeating: nil, count: count), remaining: count, isFinished: count == 0))
    }

    /// Records the answer for token `index`.
    func record(_ index: Int, _ outcome: TokenOutcome) {
        let resume = state.withLock { state -> (CheckedContinuation<[TokenOutcome?], Never>, [TokenOutcome?])? in
            if state.wasAbandoned { return nil }
            state.outcomes[index] = outcome
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            state.isFinished = true
            guard let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.outcomes)
        }
        if let (continuation, outcomes) = resume { continuation.resume(returning: outcomes) }
    }

    /// Every answer, or — when the calling task is cancelled first — those that arrived (nil for the rest).
    func wait() async -> [TokenOutcome?] {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[TokenOutcome?], Never>) in
                let ready = state.withLock { state -> [TokenOutcome?]? in
                    if state.isFinished { return state.outcomes }
                    state.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            abandon()
        }
    }

    /// Whether the batch stopped waiting (its remaining notifications must not be sent).
    var isAbandoned: Bool { state.withLock { $0.wasAbandoned } }

    /// Stops waiting: ``wait()`` returns now with what arrived.
    func abandon() {
        let resume = state.withLock { state -> (CheckedContinuation<[TokenOutcome?], Never>, [TokenOutcome?])? in
            guard !state.isFinished else { return nil }
            state.isFinished = true
            state.wasAbandoned = true
            guard let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.outcomes)
        }
        if let (continuation, outcomes) = resume { continuation.resume(returning: outcomes) }
    }
}
