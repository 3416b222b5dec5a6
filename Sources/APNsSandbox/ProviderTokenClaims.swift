import Foundation

/// The parts of a provider token's decoded JOSE header and claims that APNs reads, checked the way
/// Apple's "Establishing a token-based connection to APNs" describes them; nil (→ 403
/// `InvalidProviderToken`) when one is missing or malformed:
///
/// - header `alg`: `ES256`, the only algorithm APNs supports ("Unsecured JWTs, or JWTs signed with
///   other algorithms, are rejected … InvalidProviderToken").
/// - header `kid`: "the 10-character Key ID" — 10 ASCII letters or digits.
/// - claim `iss`: "the 10-character Team ID" — 10 ASCII letters or digits.
/// - claim `iat`: "the number of seconds since Epoch, in UTC" — a JSON number with an integral value,
///   or a string of decimal digits (see ``issuedAt(_:)``).
///
/// Other members (`typ`, an extra `kid` among the claims, …) are ignored, as Apple's servers ignore
/// them. Whether the signature, the team of the key and the age are right is
/// ``ProviderTokenVerifier``'s business.
public struct ProviderTokenClaims: Equatable {
    var keyID: String
    var issuer: String
    var issuedAt: Int64

    init?(header: [String: Any], claims: [String: Any]) {
        guard header["alg"] as? String == "ES256",
            let keyID = header["kid"] as? String, Self.isAppleIdentifier(keyID),
            let issuer = claims["iss"] as? String, Self.isAppleIdentifier(issuer),
            let issuedAt = Self.issuedAt(claims["iat"])
        else { return nil }
        self.keyID = keyID
        self.issuer = issuer
        self.issuedAt = issuedAt
    }

    /// Key ids and team ids: 10 ASCII letters or digits, as Apple issues them.
    public static func isAppleIdentifier(_ text: String) -> Bool {
        text.utf8.count == 10
            && text.utf8.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            }
    }

    /// The `iat` claim in seconds since 1970, or nil when it is not a time.
    ///
    /// Accepted: a JSON number with an integral value (what Apple's documentation shows:
    /// `"iat": 1437179036`), and a JSON string of 1–15 decimal digits (`"iat": "1700000000"`).
    /// Refused: booleans, fractions, exponents that leave an integer range, negative or signed
    /// strings, strings with spaces, empty strings, `null`, arrays and objects.
    ///
    /// Why a digit string is accepted: Apple documents what `iat` means ("the number of seconds since
    /// Epoch, in UTC"; APNs "rejects any request whose token contains a timestamp that is more than
    /// one hour old", `ExpiredProviderToken`) and which tokens it refuses (unsecured or not ES256:
    /// `InvalidProviderToken`), but not the claim's JSON type. APNSwift 5 and 6 (APNSCore's
    /// `APNSAuthenticationTokenManager`) encode `iat` as a string of digits, and that is what the
    /// Swift server ecosystem has sent to Apple's servers for years; APNSwift changed to a number when
    /// its own mock server began checking the type, not after a refusal from Apple. A sandbox that
    /// refused those tokens would fail clients that Apple serves.
    static func issuedAt(_ value: Any?) -> Int64? {
        if let text = value as? String {
            guard (1...15).contains(text.utf8.count), text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                return nil
            }
            return Int64(text)
        }
        // JSONSerialization gives booleans as NSNumbers of type "c" (char); real numbers never are.
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { return nil }
        let double = number.doubleValue
        guard double.isFinite, double == double.rounded(), abs(double) < 1e15 else { return nil }
        return Int64(double)
    }
}
