/// What the sandbox speaks on a TLS connection once the handshake is done, decided by ALPN the way
/// Apple's servers decide it.
///
/// - ALPN chose `h2`: HTTP/2 (``negotiated``).
/// - The client offered no ALPN at all: HTTP/2 with prior knowledge (RFC 9113 §3.3), the client
///   connection preface expected first (``priorKnowledge``). Python's `ssl` offers no ALPN unless
///   told to, so aioapns connects this way, and Apple's servers serve it.
/// - The client offered ALPN without `h2` (only `http/1.1`, say): the handshake never gets here —
///   the server context's ALPN callback ends it with a fatal `no_application_protocol` alert, as
///   it did before prior knowledge was allowed. Apple documents nothing about ALPN (only "use
///   HTTP/2 and TLS 1.2 or later"), so that refusal is kept rather than guessed at.
///
/// So after a completed handshake, "ALPN chose nothing" means "the client offered nothing".
enum ConnectionProtocol: Equatable {
    case negotiated
    case priorKnowledge

    /// - Parameter negotiatedHTTP2: Whether ALPN chose `h2` (``HTTP2Transport/TLSStream/negotiatedHTTP2``).
    init(negotiatedHTTP2: Bool) {
        self = negotiatedHTTP2 ? .negotiated : .priorKnowledge
    }
}
