/// The answer of ``RateLimiter/check(key:limit:period:burst:cost:)``.
public enum RateLimitDecision: Sendable, Equatable {
    /// Go ahead; `remaining` more requests of cost 1 would be allowed right now.
    case allowed(remaining: Int)
    /// Refused; the same request is allowed after `retryAfter` (if nothing else uses the key
    /// meanwhile). HTTP answers `429` with `Retry-After` rounded up to whole seconds.
    case limited(retryAfter: Duration)

    public var isAllowed: Bool {
        if case .allowed = self { true } else { false }
    }
}
