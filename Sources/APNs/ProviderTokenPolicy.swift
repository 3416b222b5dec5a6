/// When to mint a new provider token: a value type that answers with decisions, no I/O or clock of
/// its own (the caller passes `now`), so the timing rules are tested without waiting.
///
/// APNs rejects tokens older than an hour (`ExpiredProviderToken`) and throttles keys whose token
/// changes more often than every 20 minutes (`TooManyProviderTokenUpdates`). So one token is shared
/// by every connection of a key and replaced once it is ``refreshAge`` old (default 40 min: inside
/// the 20–60 minute window with margin on both sides), or once early when APNs calls the current
/// token expired — but never twice for the same token, and never for an answer about an older token.
public struct ProviderTokenPolicy: Sendable, Equatable {
    /// Age at which the current token is replaced.
    public var refreshAge: Int64
    /// The token in use: when it was issued (seconds since 1970), nil before the first.
    public private(set) var issuedAt: Int64?

    public init(refreshAgeSeconds: Int64 = 40 * 60) {
        precondition((20 * 60...59 * 60).contains(refreshAgeSeconds), "APNs wants tokens refreshed after 20 and before 60 minutes")
        refreshAge = refreshAgeSeconds
    }

    /// The `iat` of the token to use now: the current one, or `now` when a new one must be minted
    /// (then the caller signs a token for it).
    public mutating func tokenIssuedAt(now: Int64) -> (issuedAt: Int64, isNew: Bool) {
        if let issuedAt, now - issuedAt < refreshAge, now >= issuedAt {
            return (issuedAt, false)
        }
        issuedAt = now
        return (now, true)
    }

    /// APNs answered `ExpiredProviderToken` to a request signed with the token issued at `usedIssuedAt`.
    /// Returns whether a retry with a fresh token makes sense: true the first time for the current
    /// token (which is then retired), false when that token was already replaced (the retry uses the
    /// new one) or when the new token would be younger than APNs' 20-minute minimum for the old one.
    public mutating func expired(usedIssuedAt: Int64, now: Int64) -> Bool {
        guard let issuedAt else { return true }
        guard usedIssuedAt == issuedAt else { return usedIssuedAt < issuedAt }
        guard now - issuedAt >= 20 * 60 else { return false }
        self.issuedAt = nil
        return true
    }
}
