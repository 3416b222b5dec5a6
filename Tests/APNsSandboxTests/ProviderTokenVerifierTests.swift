import APNs
import Crypto
import Foundation
import PushCore
import Testing

@testable import APNsSandbox

@Suite("ProviderTokenVerifier: ES256 provider tokens as APNs checks them")
struct ProviderTokenVerifierTests {
    static let key = try! APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    static let otherKey = try! APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    static let now: Int64 = 1_800_000_000

    static func verifying() throws -> ProviderTokenVerifier {
        try ProviderTokenVerifier(publicKeyPEMs: ["ABC123DEFG": key.publicKeyPEM])
    }

    static func jwt(header: String, claims: String, signature: [UInt8] = Array(repeating: 7, count: 64)) -> String {
        func encode(_ bytes: [UInt8]) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=", with: "")
        }
        return "bearer \(encode(Array(header.utf8))).\(encode(Array(claims.utf8))).\(encode(signature))"
    }

    @Test func verifiesTheSignatureAgainstTheKeyOfTheKid() throws {
        let verifier = try Self.verifying()
        #expect(verifier.rejection(authorization: "bearer \(try Self.key.providerToken(issuedAt: Self.now))", now: Self.now) == nil)
        #expect(verifier.rejection(authorization: "Bearer \(try Self.key.providerToken(issuedAt: Self.now))", now: Self.now) == nil)
        #expect(
            verifier.rejection(authorization: "bearer \(try Self.otherKey.providerToken(issuedAt: Self.now))", now: Self.now) == .invalidProviderToken
        )
        let unknownKid = try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "ZZZ123DEFG", teamID: "DEF123GHIJ")
        #expect(
            verifier.rejection(authorization: "bearer \(try unknownKid.providerToken(issuedAt: Self.now))", now: Self.now) == .invalidProviderToken)
    }

    @Test func aTamperedTokenFails() throws {
        let verifier = try Self.verifying()
        let token = try Self.key.providerToken(issuedAt: Self.now)
        let parts = token.split(separator: ".")
        let otherClaims = try Self.key.providerToken(issuedAt: Self.now + 1).split(separator: ".")[1]
        #expect(verifier.rejection(authorization: "bearer \(parts[0]).\(otherClaims).\(parts[2])", now: Self.now) == .invalidProviderToken)
    }

    @Test func ageAndClockSkew() throws {
        let verifier = try Self.verifying()
        let token = "bearer \(try Self.key.providerToken(issuedAt: Self.now))"
        #expect(verifier.rejection(authorization: token, now: Self.now + 3600) == nil)
        // The cached verdict still ages.
        #expect(verifier.rejection(authorization: token, now: Self.now + 3601) == .expiredProviderToken)
        #expect(verifier.rejection(authorization: token, now: Self.now - 600) == nil)
        #expect(verifier.rejection(authorization: token, now: Self.now - 601) == .invalidProviderToken)
    }

    @Test func withoutKeysAnyWellFormedTokenPasses() {
        let verifier = ProviderTokenVerifier()
        #expect(
            verifier.rejection(
                authorization: Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":\#(Self.now)}"#),
                now: Self.now) == nil)
    }

    /// APNSwift 5 and 6 send `"iat": "<digits>"`; Apple's servers take it (ProviderTokenClaims).
    @Test func anIatOfDecimalDigitsInAStringIsATime() throws {
        let verifier = ProviderTokenVerifier()
        let header = #"{"alg":"ES256","typ":"JWT","kid":"KEY0000001"}"#
        let apnswift = Self.jwt(header: header, claims: #"{"iss":"TEAM000001","iat":"\#(Self.now)","kid":"KEY0000001"}"#)
        #expect(verifier.rejection(authorization: apnswift, now: Self.now) == nil)
        #expect(verifier.rejection(authorization: apnswift, now: Self.now + 3601) == .expiredProviderToken)
    }

    @Test func aKeyTiedToATeamNeedsThatTeamInIss() throws {
        let p8 = P256.Signing.PrivateKey().pemRepresentation
        let key = try APNsSigningKey(p8: p8, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let sameKeyOtherTeam = try APNsSigningKey(p8: p8, keyID: "ABC123DEFG", teamID: "OTHER12345")
        let otherKey = try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "XYZ123DEFG", teamID: "OTHER12345")
        let signed = try ProviderTokenVerifier(
            publicKeyPEMs: ["ABC123DEFG": key.publicKeyPEM, "XYZ123DEFG": otherKey.publicKeyPEM], keyTeams: ["ABC123DEFG": "DEF123GHIJ"])
        let unsigned = ProviderTokenVerifier(keyTeams: ["ABC123DEFG": "DEF123GHIJ"])
        for verifier in [signed, unsigned] {
            #expect(verifier.rejection(authorization: "bearer \(try key.providerToken(issuedAt: Self.now))", now: Self.now) == nil)
            #expect(
                verifier.rejection(authorization: "bearer \(try sameKeyOtherTeam.providerToken(issuedAt: Self.now))", now: Self.now)
                    == .invalidProviderToken)
            // A key with no team given takes any well-formed team.
            #expect(verifier.rejection(authorization: "bearer \(try otherKey.providerToken(issuedAt: Self.now))", now: Self.now) == nil)
        }
    }

    /// Apple lets a key be limited to one environment; its tokens in the other are refused with the
    /// reason APNs sends (`BadEnvironmentKeyInToken`), which the client takes as a credential problem.
    @Test func aKeyLimitedToOneEnvironmentIsRefusedInTheOther() throws {
        let production = try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "PROD123456", teamID: "DEF123GHIJ")
        let both = try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "BOTH123456", teamID: "DEF123GHIJ")
        let limits: [String: AppConfiguration.Environment] = ["PROD123456": .production]
        let development = ProviderTokenVerifier(keyEnvironments: limits, environment: .sandbox)
        let live = ProviderTokenVerifier(keyEnvironments: limits, environment: .production)
        let productionToken = "bearer \(try production.providerToken(issuedAt: Self.now))"
        let bothToken = "bearer \(try both.providerToken(issuedAt: Self.now))"
        let refusal = development.rejection(authorization: productionToken, now: Self.now)
        #expect(refusal == .badEnvironmentKeyInToken && refusal?.rawValue == "BadEnvironmentKeyInToken")
        #expect(refusal.map { APNsOutcome(status: 403, reason: $0, timestamp: nil) } == .credentialProblem)
        #expect(live.rejection(authorization: productionToken, now: Self.now) == nil)
        #expect(development.rejection(authorization: bothToken, now: Self.now) == nil)
        #expect(live.rejection(authorization: bothToken, now: Self.now) == nil)
    }

    @Test func malformedTokens() {
        let verifier = ProviderTokenVerifier()
        let claims = #"{"iss":"TEAM000001","iat":\#(Self.now)}"#
        let cases = [
            "",
            "bearer",
            "basic abc",
            "bearer a.b",
            "bearer a.b.c.d",
            "bearer !!.??.**",
            Self.jwt(header: #"{"alg":"HS256","kid":"KEY0000001"}"#, claims: claims),
            Self.jwt(header: #"{"alg":"none","kid":"KEY0000001"}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256"}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256","kid":""}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256","kid":"K"}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY00000001"}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY000000-"}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256","kid":1234567890}"#, claims: claims),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iat":\#(Self.now)}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"T","iat":\#(Self.now)}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM 00001","iat":\#(Self.now)}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001"}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":true}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":1.5}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":"1.8e9"}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":" \#(Self.now)"}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":null}"#),
            Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: claims, signature: Array(repeating: 1, count: 63)),
            Self.jwt(header: "not json", claims: claims),
        ]
        for authorization in cases {
            #expect(verifier.rejection(authorization: authorization, now: Self.now) == .invalidProviderToken, "\(authorization)")
        }
    }

    @Test func aBadPublicKeyIsNamed() {
        #expect(throws: SandboxError.self) {
            try ProviderTokenVerifier(publicKeyPEMs: ["KEY1234567": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"])
        }
        let error = #expect(throws: SandboxError.self) { try ProviderTokenVerifier(publicKeyPEMs: ["KEY1234567": "garbage"]) }
        #expect(error?.message.contains("KEY1234567") == true)
        #expect(error?.code == .configuration)
    }

    @Test func theCacheIsBounded() throws {
        let verifier = ProviderTokenVerifier()
        for issuedAt in 0..<Int64(ProviderTokenVerifier.cacheLimit * 2 + 5) {
            let token = Self.jwt(header: #"{"alg":"ES256","kid":"KEY0000001"}"#, claims: #"{"iss":"TEAM000001","iat":\#(Self.now - issuedAt)}"#)
            #expect(verifier.rejection(authorization: token, now: Self.now) == (issuedAt > 3600 ? .expiredProviderToken : nil))
            #expect(verifier.cachedVerdicts <= ProviderTokenVerifier.cacheLimit)
        }
        #expect(verifier.cachedVerdicts > 0, "verdicts are cached")
    }
}
