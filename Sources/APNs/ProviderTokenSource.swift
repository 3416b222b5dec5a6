import Synchronization

/// The one provider token every connection of a client uses: minted from the signing key when
/// ``ProviderTokenPolicy`` says so (at most every 20 minutes), never per request.
///
/// The clock is injectable (seconds since 1970) so the refresh timing is tested without waiting.
final class ProviderTokenSource: Sendable {
    private struct State {
        var policy: ProviderTokenPolicy
        var authorization: String?
        var mints = 0
    }

    let key: APNsSigningKey
    private let clock: @Sendable () -> Int64
    private let state: Mutex<State>

    init(key: APNsSigningKey, refreshAgeSeconds: Int64, clock: @escaping @Sendable () -> Int64) {
        self.key = key
        self.clock = clock
        state = Mutex(State(policy: ProviderTokenPolicy(refreshAgeSeconds: refreshAgeSeconds)))
    }

    /// The `authorization` header value to use now and the `iat` of its token.
    func authorization() throws(APNsClientError) -> (value: String, issuedAt: Int64) {
        let now = clock()
        let result = state.withLock { state -> Result<(value: String, issuedAt: Int64), APNsClientError> in
            let (issuedAt, isNew) = state.policy.tokenIssuedAt(now: now)
            if !isNew, let authorization = state.authorization { return .success((authorization, issuedAt)) }
            do {
                let value = "bearer \(try key.providerToken(issuedAt: issuedAt))"
                state.authorization = value
                state.mints += 1
                return .success((value, issuedAt))
            } catch {
                return .failure(APNsClientError(.credentials, "\(error)"))
            }
        }
        return try result.get()
    }

    /// APNs answered `ExpiredProviderToken` to a request signed with the token issued at
    /// `usedIssuedAt`: whether resending it (with a fresh token) makes sense.
    func expired(usedIssuedAt: Int64) -> Bool {
        let now = clock()
        return state.withLock { state in
            let retry = state.policy.expired(usedIssuedAt: usedIssuedAt, now: now)
            if state.policy.issuedAt == nil { state.authorization = nil }
            return retry
        }
    }

    /// How many tokens were minted so far.
    var mints: Int { state.withLock { $0.mints } }
}
