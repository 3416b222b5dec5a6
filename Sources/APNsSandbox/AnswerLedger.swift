/// One connection's accepted notifications (200s) whose answers the client may not have: if the
/// connection dies, a client that retries what it was not answered sends each of them again, so
/// these are the duplicates a dropped or killed connection can honestly cause. The sandbox adds them
/// to `lost_answers` in `GET /stats`, which the chaos suite uses as its duplicate bound, instead of
/// trusting the client's own account.
///
/// An answer moves: accepted (decided, maybe held by `delay_ms`) → sent (nghttp2 serialized it and
/// closed the stream) → written (every byte went to the socket) → confirmed (the client
/// acknowledged a PING written after it, so its HTTP/2 layer processed the answer; or, without
/// `--confirm-answers`, as soon as it is written). Pure counting: the connection reports the events.
struct AnswerLedger: Equatable {
    /// Confirm answers with PINGs rather than counting them had once written.
    let confirmsWithPing: Bool
    /// Accepted answers on streams still open (held by a delay, or sent but not yet closed).
    private(set) var open = 0
    /// Accepted answers nghttp2 finished sending.
    private(set) var sent = 0
    /// Of `sent`, those every byte of which reached the socket.
    private(set) var written = 0
    /// Of `written`, those the client is known to have processed.
    private(set) var confirmed = 0
    /// `written` when the PING now in flight was written, nil with none in flight.
    private var pingCovers: Int?

    init(confirmsWithPing: Bool) {
        self.confirmsWithPing = confirmsWithPing
    }

    /// An accepted notification's answer was decided on a stream.
    mutating func accepted() {
        open += 1
    }

    /// The stream of an accepted answer closed. Returns the answers lost with it: 1 when the
    /// client reset the stream before the answer was sent (a timeout), else 0.
    mutating func acceptedStreamClosed(answerSent: Bool) -> Int {
        open -= 1
        if answerSent {
            sent += 1
            return 0
        }
        return 1
    }

    /// All output reached the socket. Returns true when a PING should go now, to confirm what was
    /// written since the last one (one in flight at a time: its acknowledgement covers everything
    /// written before it, in order).
    mutating func outputFlushed() -> Bool {
        written = sent
        guard confirmsWithPing else {
            confirmed = written
            return false
        }
        guard pingCovers == nil, written > confirmed else { return false }
        pingCovers = written
        return true
    }

    /// The client acknowledged a PING. Returns true when another should go now, for what was
    /// written since this one went out.
    mutating func pingAcknowledged() -> Bool {
        guard let covers = pingCovers else { return false }
        confirmed = max(confirmed, covers)
        pingCovers = nil
        guard written > confirmed else { return false }
        pingCovers = written
        return true
    }

    /// What the connection's end without a goodbye loses: the accepted answers the client may not
    /// have had (open streams, and sent answers not yet confirmed).
    var unconfirmed: Int { open + sent - confirmed }

    /// The connection ended: returns what it lost, counted once. Answers still owed are lost
    /// either way; sent but unconfirmed ones only when the client left without a goodbye (GOAWAY),
    /// since a client that says goodbye has read what it waited for.
    mutating func end(clientSaidGoodbye: Bool) -> Int {
        let lost = clientSaidGoodbye ? open : unconfirmed
        open = 0
        sent = 0
        written = 0
        confirmed = 0
        pingCovers = nil
        return lost
    }
}
