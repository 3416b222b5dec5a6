import Foundation
import Testing

@testable import APNsSandbox

@Suite("ProviderTokenClaims: alg, kid, iss and iat as Apple documents them")
struct ProviderTokenClaimsTests {
    static var header: [String: Any] { ["alg": "ES256", "kid": "ABC123DEFG"] }

    static func claims(iat: Any?) -> ProviderTokenClaims? {
        var claims: [String: Any] = ["iss": "DEF123GHIJ"]
        claims["iat"] = iat
        return ProviderTokenClaims(header: header, claims: claims)
    }

    @Test func readsWhatAPNsReads() {
        let parsed = ProviderTokenClaims(
            header: ["alg": "ES256", "kid": "ABC123DEFG", "typ": "JWT"], claims: ["iss": "DEF123GHIJ", "iat": 1_700_000_000])
        #expect(parsed == ProviderTokenClaims(header: Self.header, claims: ["iss": "DEF123GHIJ", "iat": 1_700_000_000, "kid": "ABC123DEFG"]))
        #expect(parsed?.keyID == "ABC123DEFG")
        #expect(parsed?.issuer == "DEF123GHIJ")
        #expect(parsed?.issuedAt == 1_700_000_000)
    }

    /// The decision ProviderTokenClaims.issuedAt(_:) documents: Apple gives iat's meaning, not its
    /// JSON type, and serves APNSwift 5/6's digit strings.
    @Test func iatIsANumberOrAStringOfDigits() {
        #expect(Self.claims(iat: 1_700_000_000)?.issuedAt == 1_700_000_000)
        #expect(Self.claims(iat: 1_700_000_000.0)?.issuedAt == 1_700_000_000)
        #expect(Self.claims(iat: "1700000000")?.issuedAt == 1_700_000_000)
        #expect(Self.claims(iat: "0")?.issuedAt == 0)
        for refused: Any? in [
            nil, true, false, 1.5, "", " 1700000000", "1700000000 ", "+1700000000", "-1", "1.7e9", "0x10", "١٧٠٠", "9999999999999999", [1], ["a": 1],
            NSNull(),
        ] {
            #expect(Self.claims(iat: refused) == nil, "\(String(describing: refused))")
        }
    }

    @Test func algMustBeES256() {
        for alg: Any in ["HS256", "RS256", "none", "es256", 256] {
            #expect(ProviderTokenClaims(header: ["alg": alg, "kid": "ABC123DEFG"], claims: ["iss": "DEF123GHIJ", "iat": 1]) == nil, "\(alg)")
        }
    }

    @Test func kidAndIssAreTenLettersOrDigits() {
        #expect(ProviderTokenClaims.isAppleIdentifier("ABC123DEFG"))
        #expect(ProviderTokenClaims.isAppleIdentifier("abc123defg"))
        for bad in ["", "ABC123DEF", "ABC123DEFGH", "ABC123DEF-", "ABC123DEF ", "ÄBC123DEFG"] {
            #expect(!ProviderTokenClaims.isAppleIdentifier(bad), "\(bad)")
            #expect(ProviderTokenClaims(header: ["alg": "ES256", "kid": bad], claims: ["iss": "DEF123GHIJ", "iat": 1]) == nil)
            #expect(ProviderTokenClaims(header: Self.header, claims: ["iss": bad, "iat": 1]) == nil)
        }
        #expect(ProviderTokenClaims(header: ["alg": "ES256", "kid": 1_234_567_890], claims: ["iss": "DEF123GHIJ", "iat": 1]) == nil)
    }
}
