import Crypto
import Foundation

/// The `authorization` value for token auth, made once and reused for 55 minutes, as APNSwift's
/// `APNSAuthenticationTokenManager` does: an actor, so every request awaits it.
///
/// One difference: the `iat` claim is a JSON number here. APNSwift writes it as a string
/// (`"iat": "1700000000"`), which Apple accepts (and apns-sandbox too, since it was taught to;
/// when this was written it answered 403 InvalidProviderToken).
actor ProviderTokenCache {
    private let privateKey: P256.Signing.PrivateKey
    private let keyID: String
    private let teamID: String
    private var current: (value: String, issuedAt: ContinuousClock.Instant)?

    init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    /// `bearer <JWT>`, fresh when the last one is 55 minutes old.
    func authorization() throws -> String {
        if let current, current.issuedAt.duration(to: .now) < .seconds(55 * 60) {
            return current.value
        }
        let header = #"{"alg":"ES256","typ":"JWT","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(Int(Date().timeIntervalSince1970))}"#
        let signingInput = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try privateKey.signature(for: Data(signingInput.utf8))
        let value = "bearer " + signingInput + "." + Self.base64URL(signature.rawRepresentation)
        current = (value, .now)
        return value
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
