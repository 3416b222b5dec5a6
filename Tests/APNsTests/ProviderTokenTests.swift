import APNs
import Crypto
import Foundation
import Testing

@Suite struct APNsSigningKeyTests {
    @Test func providerTokensAreES256JWTsAPNsCanVerify() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try APNsSigningKey(p8: privateKey.pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try key.providerToken(issuedAt: 1_700_000_000)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(try decode(parts[0]) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(try decode(parts[1]) == #"{"iss":"DEF123GHIJ","iat":1700000000}"#)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try bytes(parts[2]))
        #expect(privateKey.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(!token.contains("="))
    }

    @Test func badKeysAndIdentifiersAreNamed() {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        #expect(throws: APNsCredentialError.self) { try APNsSigningKey(p8: "not a key", keyID: "ABC123DEFG", teamID: "DEF123GHIJ") }
        #expect {
            try APNsSigningKey(p8: pem, keyID: "short", teamID: "DEF123GHIJ")
        } throws: { "\($0)".contains("key id 'short'") }
        #expect {
            try APNsSigningKey(p8: pem, keyID: "ABC123DEFG", teamID: "team id!!!")
        } throws: { "\($0)".contains("team id") }
        let p384 = P384.Signing.PrivateKey().pemRepresentation
        #expect {
            try APNsSigningKey(p8: p384, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        } throws: { "\($0)".contains("P-256") }
        #expect {
            try APNsSigningKey(p8File: "/no/such/AuthKey.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        } throws: { "\($0)".contains("/no/such/AuthKey.p8") }
    }

    private func bytes(_ base64URL: String) throws -> [UInt8] {
        var text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return Array(try #require(Data(base64Encoded: text)))
    }

    private func decode(_ base64URL: String) throws -> String {
        String(decoding: try bytes(base64URL), as: UTF8.self)
    }
}

@Suite struct ProviderTokenPolicyTests {
    @Test func oneTokenIsReusedUntilItsRefreshAge() {
        var policy = ProviderTokenPolicy()
        #expect(policy.tokenIssuedAt(now: 1000) == (1000, true))
        #expect(policy.tokenIssuedAt(now: 1001) == (1000, false))
        #expect(policy.tokenIssuedAt(now: 1000 + 39 * 60) == (1000, false))
        #expect(policy.tokenIssuedAt(now: 1000 + 40 * 60) == (1000 + 40 * 60, true))
    }

    @Test func aClockThatWentBackwardsMintsANewToken() {
        var policy = ProviderTokenPolicy()
        _ = policy.tokenIssuedAt(now: 5000)
        #expect(policy.tokenIssuedAt(now: 4000) == (4000, true))
    }

    @Test func expiredProviderTokenRefreshesOncePerToken() {
        var policy = ProviderTokenPolicy()
        _ = policy.tokenIssuedAt(now: 0)
        // Too young to be replaced without TooManyProviderTokenUpdates: no retry.
        #expect(policy.expired(usedIssuedAt: 0, now: 10 * 60) == false)
        #expect(policy.tokenIssuedAt(now: 10 * 60) == (0, false))
        // Old enough: retire it once; the next request mints a new token.
        #expect(policy.expired(usedIssuedAt: 0, now: 25 * 60) == true)
        #expect(policy.tokenIssuedAt(now: 25 * 60) == (25 * 60, true))
        // Late answers about the old token do not retire the new one; they retry with it.
        #expect(policy.expired(usedIssuedAt: 0, now: 25 * 60 + 1) == true)
        #expect(policy.tokenIssuedAt(now: 25 * 60 + 2) == (25 * 60, false))
    }

    @Test func theRefreshAgeStaysInsideAPNsWindow() {
        #expect(ProviderTokenPolicy(refreshAgeSeconds: 20 * 60).refreshAge == 1200)
        #expect(ProviderTokenPolicy(refreshAgeSeconds: 59 * 60).refreshAge == 3540)
    }
}
