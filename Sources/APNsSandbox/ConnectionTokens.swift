import APNs

/// What one connection's provider tokens said so far, for the two refusals APNs ties to a
/// connection: the connection belongs to the key of its first token (a token of another key is 403
/// `UnrelatedKeyIdInToken`), and a token may replace the one before it only 20 minutes after that one
/// was issued (sooner is 429 `TooManyProviderTokenUpdates`: Apple asks that a token be refreshed
/// "no more than once every 20 minutes"). A value: the connection owns one and passes each token in.
struct ConnectionTokens: Sendable, Equatable {
    /// The key of the connection's first token.
    private(set) var keyID: String?
    /// The `iat` of the token in use on the connection.
    private(set) var issuedAt: Int64?

    static let minimumUpdateInterval: Int64 = 20 * 60

    /// The refusal for a token of `keyID` issued at `issuedAt` on this connection, or nil (and the
    /// token becomes the one in use).
    mutating func admit(keyID: String, issuedAt: Int64) -> PushRejection? {
        guard let first = self.keyID, let current = self.issuedAt else {
            self.keyID = keyID
            self.issuedAt = issuedAt
            return nil
        }
        guard keyID == first else { return PushRejection(403, .unrelatedKeyIdInToken) }
        guard issuedAt != current else { return nil }
        guard abs(issuedAt - current) >= Self.minimumUpdateInterval else { return PushRejection(429, .tooManyProviderTokenUpdates) }
        self.issuedAt = issuedAt
        return nil
    }
}
