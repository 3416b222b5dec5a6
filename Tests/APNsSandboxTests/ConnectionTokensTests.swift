import APNs
import Testing

@testable import APNsSandbox

/// The refusals APNs ties to one connection's provider tokens.
@Suite struct ConnectionTokensTests {
    @Test func aConnectionBelongsToTheKeyOfItsFirstToken() {
        var tokens = ConnectionTokens()
        #expect(tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000) == nil)
        #expect(tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000) == nil, "the same token again")
        #expect(tokens.admit(keyID: "ZZZ999YYYX", issuedAt: 1_000_000) == PushRejection(403, .unrelatedKeyIdInToken))
        // Refused tokens change nothing: the first key's token still passes.
        #expect(tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000) == nil)
        #expect(tokens.keyID == "ABC123DEFG")
    }

    @Test func aTokenReplacedWithinTwentyMinutesIsTooManyUpdates() {
        var tokens = ConnectionTokens()
        #expect(tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000) == nil)
        #expect(tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000 + 19 * 60) == PushRejection(429, .tooManyProviderTokenUpdates))
        #expect(tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000 - 60) == PushRejection(429, .tooManyProviderTokenUpdates))
        #expect(tokens.issuedAt == 1_000_000)
        // 20 minutes on, as the client's policy replaces it (at 40): accepted, and the new one counts.
        let later = tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000 + 40 * 60)
        #expect(later == nil)
        #expect(tokens.issuedAt == 1_002_400)
        let soonAfter = tokens.admit(keyID: "ABC123DEFG", issuedAt: 1_000_000 + 50 * 60)
        #expect(soonAfter == PushRejection(429, .tooManyProviderTokenUpdates))
    }
}
