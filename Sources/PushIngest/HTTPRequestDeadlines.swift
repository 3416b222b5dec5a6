/// The per-request timeout of one HTTP/1.1 connection, as a value type that returns actions and does no
/// I/O (``HTTPRequestTimeoutHandler`` carries them out on the connection's event loop).
///
/// Why not a timer task per request: racing each handler against `Task.sleep` in a task group cost a
/// third of push-ingest's throughput (two child tasks and a Dispatch timer per request). This needs
/// one event-loop timer per connection, armed when a request arrives on an idle connection and left
/// running across requests: when it fires early (the request it was armed for has been answered) it
/// re-arms for the oldest request still open, or stops when there is none.
///
/// Requests are answered in order (HTTP/1.1), so the open requests are a FIFO of deadlines; with
/// pipelining a later request's clock starts when its head arrives, not when its turn comes.
struct HTTPRequestDeadlines<Instant: Comparable & Sendable>: Sendable {
    enum Action: Equatable, Sendable {
        /// Nothing to do.
        case none
        /// Arm the connection's timer to fire at this instant.
        case schedule(Instant)
        /// The oldest open request is over its deadline and no answer has started: answer and close
        /// the connection — `408` when its body had not all arrived (the client's doing), else `503`
        /// (answering took too long).
        case timeOut(bodyArrived: Bool)
    }

    /// Deadlines of requests whose head has arrived and whose answer has not ended, oldest first,
    /// and whether each one's end (its whole body) has arrived.
    private var open: [(deadline: Instant, bodyArrived: Bool)] = []
    /// Whether the oldest open request's answer has started (its head is written): it is then left
    /// to finish rather than cut off mid-answer.
    private var answerStarted = false
    private var timerArmed = false
    private var timedOut = false

    /// A request head arrived; its deadline is `deadline`.
    mutating func requestStarted(deadline: Instant) -> Action {
        guard !timedOut else { return .none }
        open.append((deadline, false))
        return armIfNeeded()
    }

    /// The end of a request (its whole body) arrived: that of the newest open request, as a request's
    /// end always comes before the next one's head.
    mutating func requestEnded() {
        guard !open.isEmpty else { return }
        open[open.count - 1].bodyArrived = true
    }

    /// The answer to the oldest open request started (its head was written).
    mutating func answerBegan() {
        answerStarted = true
    }

    /// The answer to the oldest open request ended.
    mutating func answerEnded() -> Action {
        if !open.isEmpty { open.removeFirst() }
        answerStarted = false
        return armIfNeeded()
    }

    /// The timer fired at `now`.
    mutating func timerFired(now: Instant) -> Action {
        timerArmed = false
        guard !timedOut, let oldest = open.first else { return .none }
        if now < oldest.deadline {
            // The request the timer was armed for was answered in time; wait for the next one.
            return armIfNeeded()
        }
        if answerStarted {
            // Late, but the answer is being written: let it finish; its end re-arms the timer.
            return .none
        }
        timedOut = true
        return .timeOut(bodyArrived: oldest.bodyArrived)
    }

    private mutating func armIfNeeded() -> Action {
        guard !timerArmed, !timedOut, let oldest = open.first else { return .none }
        timerArmed = true
        return .schedule(oldest.deadline)
    }

    /// Whether the connection timed out; later writes of the late handler are dropped.
    var hasTimedOut: Bool { timedOut }
}
