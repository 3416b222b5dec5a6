import Crypto
import Foundation

/// A token-auth signing key: the `.p8` file Apple issues (a PKCS#8 P-256 private key in PEM), its
/// key id and the team id. It makes the ES256 provider tokens APNs expects in `authorization`.
public struct APNsSigningKey: Sendable {
    public let keyID: String
    public let teamID: String
    /// The private key's raw scalar: swift-crypto's key type is not `Sendable` on Linux, and tokens
    /// are signed only every 40 minutes, so the key is rebuilt for each signature.
    private let rawKey: [UInt8]

    /// Loads the key from the `.p8` text; errors say what is wrong with which input.
    public init(p8 pem: String, keyID: String, teamID: String) throws(APNsCredentialError) {
        guard Self.isIdentifier(keyID) else {
            throw APNsCredentialError("key id '\(keyID)' must be 10 letters or digits")
        }
        guard Self.isIdentifier(teamID) else {
            throw APNsCredentialError("team id '\(teamID)' must be 10 letters or digits")
        }
        guard pem.contains("-----BEGIN PRIVATE KEY-----") else {
            throw APNsCredentialError("the .p8 file is not a PEM private key (no '-----BEGIN PRIVATE KEY-----' line)")
        }
        do {
            rawKey = Array(try P256.Signing.PrivateKey(pemRepresentation: pem).rawRepresentation)
        } catch {
            throw APNsCredentialError("the .p8 file is not a P-256 (ES256) private key: \(error)")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Loads the key from a `.p8` file.
    public init(p8File path: String, keyID: String, teamID: String) throws(APNsCredentialError) {
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw APNsCredentialError("cannot read the .p8 file '\(path)'")
        }
        do {
            try self.init(p8: pem, keyID: keyID, teamID: teamID)
        } catch {
            throw APNsCredentialError("\(path): \(error.message)")
        }
    }

    /// The public key, PEM, for verifying tokens (apns-sandbox's `--public-key`).
    public var publicKeyPEM: String {
        // rawKey came from a valid key, so rebuilding it cannot fail.
        (try! P256.Signing.PrivateKey(rawRepresentation: rawKey)).publicKey.pemRepresentation
    }

    /// A provider token issued at `issuedAt` (seconds since 1970): `header.claims.signature`, each
    /// base64url without padding; header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}`.
    public func providerToken(issuedAt: Int64) throws(APNsCredentialError) -> String {
        let header = Self.base64URL(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = Self.base64URL(Array(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        let signingInput = "\(header).\(claims)"
        do {
            let key = try P256.Signing.PrivateKey(rawRepresentation: rawKey)
            let signature = try key.signature(for: Data(signingInput.utf8))
            return "\(signingInput).\(Self.base64URL(Array(signature.rawRepresentation)))"
        } catch {
            throw APNsCredentialError("signing the provider token failed: \(error)")
        }
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func isIdentifier(_ text: String) -> Bool {
        text.utf8.count == 10 && text.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("a"..."z").contains($0) || ("0"..."9").contains($0) }
    }
}

/// Unusable APNs credentials (a bad `.p8`, key id, team id or certificate), with what is wrong.
public struct APNsCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension APNsSigningKey {
    /// A freshly generated key, for benchmarks and tests against servers that accept any well-formed
    /// token (apns-sandbox without `--public-key`).
    public static func ephemeral(keyID: String, teamID: String) throws(APNsCredentialError) -> APNsSigningKey {
        try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: keyID, teamID: teamID)
    }
}
