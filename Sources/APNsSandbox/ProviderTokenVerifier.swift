import APNs
import Crypto
import Foundation
import PushCore

/// Checks `authorization: bearer <JWT>` provider tokens as APNs does: an ES256 JWT whose header has
/// `alg` ES256 and a 10-character `kid`, whose claims have a 10-character `iss` and an `iat` (see
/// ``ProviderTokenClaims`` for the forms, a string of digits included), signed by the key `kid`
/// names, naming in `iss` the team that key belongs to (when ``init(publicKeys:keyTeams:keyEnvironments:environment:)``
/// was told), of a key allowed in this server's environment (else `BadEnvironmentKeyInToken`, as APNs
/// spells it: Apple lets a key be limited to the sandbox or to production), and at most an hour old
/// (older: ``APNsReason/expiredProviderToken``).
///
/// With no public keys every well-formed ES256 token is accepted (its signature is not checked);
/// with keys, a token whose `kid` has none is refused. Results are cached per token text (clients
/// reuse one token for 20–60 minutes), so a signature is verified once, not per request; the age is
/// checked on every use. One verifier per worker thread: it is not thread-safe.
public final class ProviderTokenVerifier {
    /// How old (`iat`) a token may be before it is ``APNsReason/expiredProviderToken``: one hour.
    public static let maximumAge: Int64 = 3600
    /// How far in the future `iat` may lie (clock skew) before the token is invalid: ten minutes.
    public static let maximumClockSkew: Int64 = 600
    /// Cached tokens kept at most; the cache starts over when full.
    static let cacheLimit = 1024

    private let publicKeys: [String: P256.Signing.PublicKey]
    private let keyTeams: [String: String]
    private let keyEnvironments: [String: AppConfiguration.Environment]
    private let environment: AppConfiguration.Environment
    private var cache: [String: Verdict] = [:]
    /// Verdicts cached now (at most ``cacheLimit``).
    var cachedVerdicts: Int { cache.count }

    /// What a token's text says, independent of the time it is used.
    private enum Verdict {
        case wellFormed(issuedAt: Int64, keyID: String)
        case invalid
    }

    /// - Parameters:
    ///   - publicKeys: Key id (`kid`) → public key; empty accepts any well-formed token.
    ///   - keyTeams: Key id → the team id the key belongs to (`--key-team`): a token with that `kid`
    ///     must name the team in `iss`, as Apple refuses a key used for another team.
    ///   - keyEnvironments: Key id → the one environment the key may be used in (`--key-environment`);
    ///     keys not named serve both.
    ///   - environment: The environment this server plays (`--environment`).
    public init(
        publicKeys: [String: P256.Signing.PublicKey] = [:], keyTeams: [String: String] = [:],
        keyEnvironments: [String: AppConfiguration.Environment] = [:], environment: AppConfiguration.Environment = .sandbox
    ) {
        self.publicKeys = publicKeys
        self.keyTeams = keyTeams
        self.keyEnvironments = keyEnvironments
        self.environment = environment
    }

    /// The verifier `configuration` describes; throws naming the key id whose PEM is unusable.
    public convenience init(configuration: SandboxConfiguration) throws(SandboxError) {
        try self.init(
            publicKeyPEMs: configuration.publicKeys, keyTeams: configuration.keyTeams, keyEnvironments: configuration.keyEnvironments,
            environment: configuration.environment)
    }

    /// Parses PEM public keys by key id; throws naming the key id whose PEM is unusable.
    public convenience init(
        publicKeyPEMs: [String: String], keyTeams: [String: String] = [:],
        keyEnvironments: [String: AppConfiguration.Environment] = [:], environment: AppConfiguration.Environment = .sandbox
    ) throws(SandboxError) {
        var keys: [String: P256.Signing.PublicKey] = [:]
        for (keyID, pem) in publicKeyPEMs {
            do {
                keys[keyID] = try P256.Signing.PublicKey(pemRepresentation: pem)
            } catch {
                throw SandboxError(.configuration, "--public-key \(keyID): not a P-256 public key in PEM (\(error))")
            }
        }
        self.init(publicKeys: keys, keyTeams: keyTeams, keyEnvironments: keyEnvironments, environment: environment)
    }

    /// nil when the `authorization` value carries a valid, fresh token; otherwise the reason APNs
    /// gives (403 ``APNsReason/invalidProviderToken``, `BadEnvironmentKeyInToken` or
    /// ``APNsReason/expiredProviderToken``).
    /// - Parameters:
    ///   - authorization: The header's value, `bearer <JWT>`.
    ///   - now: Seconds since 1970.
    public func rejection(authorization: String, now: Int64) -> APNsReason? {
        switch verdict(authorization) {
        case .invalid:
            return .invalidProviderToken
        case .wellFormed(let issuedAt, let keyID):
            if let allowed = keyEnvironments[keyID], allowed != environment { return .badEnvironmentKeyInToken }
            if now - issuedAt > Self.maximumAge { return .expiredProviderToken }
            if issuedAt - now > Self.maximumClockSkew { return .invalidProviderToken }
            return nil
        }
    }

    /// The key id and `iat` of a well-formed (and, with keys, verified) token; nil otherwise.
    func identity(of authorization: String) -> (keyID: String, issuedAt: Int64)? {
        guard case .wellFormed(let issuedAt, let keyID) = verdict(authorization) else { return nil }
        return (keyID, issuedAt)
    }

    private func verdict(_ authorization: String) -> Verdict {
        if let cached = cache[authorization] { return cached }
        let verdict = evaluate(authorization)
        if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
        cache[authorization] = verdict
        return verdict
    }

    private func evaluate(_ authorization: String) -> Verdict {
        let scheme = "bearer "
        guard authorization.utf8.count > scheme.utf8.count,
            authorization.prefix(scheme.count).lowercased() == scheme
        else { return .invalid }
        let token = authorization.dropFirst(scheme.count).trimmingCharacters(in: .whitespaces)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Self.base64URLDecode(parts[0]),
            let claimsBytes = Self.base64URLDecode(parts[1]),
            let signature = Self.base64URLDecode(parts[2]), signature.count == 64,
            let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: Data(claimsBytes))) as? [String: Any],
            let parsed = ProviderTokenClaims(header: header, claims: claims)
        else { return .invalid }
        if let team = keyTeams[parsed.keyID], team != parsed.issuer { return .invalid }
        guard !publicKeys.isEmpty else { return .wellFormed(issuedAt: parsed.issuedAt, keyID: parsed.keyID) }
        guard let key = publicKeys[parsed.keyID],
            let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return .invalid }
        let signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        return key.isValidSignature(ecdsa, for: signingInput) ? .wellFormed(issuedAt: parsed.issuedAt, keyID: parsed.keyID) : .invalid
    }

    static func base64URLDecode(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty,
            text.utf8.allSatisfy({ byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            })
        else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        switch base64.utf8.count % 4 {
        case 2: base64 += "=="
        case 3: base64 += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: base64).map { Array($0) }
    }
}
