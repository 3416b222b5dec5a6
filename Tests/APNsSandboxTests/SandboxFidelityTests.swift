import APNs
import Crypto
import Foundation
import TestSupport
import Testing

/// apns-sandbox with what clients nobody here wrote send: no ALPN (aioapns), APNSwift's string
/// `iat`, a key tied to its team. The built executable, real TLS, curl as the client.
@Suite("apns-sandbox answers foreign clients the way Apple does")
struct SandboxFidelityTests {
    /// Signs the hand-made tokens below (``SandboxProcess/signingKey`` keeps its private key to itself).
    static let privateKeyPEM = P256.Signing.PrivateKey().pemRepresentation
    static var privateKey: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM) }

    /// curl with `--no-alpn --http2-prior-knowledge` offers no ALPN and sends the HTTP/2 connection
    /// preface right after the handshake, as aioapns (Python's ssl and h2) does.
    @Test func aTLSClientWithoutALPNGetsHTTP2WithPriorKnowledge() async throws {
        let sandbox = try await SandboxProcess()
        let noALPN = try await sandbox.push(curlArguments: ["--no-alpn", "--http2-prior-knowledge", "-v"])
        #expect(noALPN.status == 200, "\(noALPN)")
        #expect(!noALPN.output.contains("ALPN: offers"), "\(noALPN)")
        #expect(UUID(uuidString: noALPN.headers["apns-unique-id"] ?? "") != nil, "\(noALPN)")
        // Without ALPN, refusals are answered as on an ALPN connection.
        let refused = try await sandbox.push(token: "abcd", curlArguments: ["--no-alpn", "--http2-prior-knowledge"])
        #expect(refused.status == 400, "\(refused)")
        #expect(refused.reason == "BadDeviceToken", "\(refused)")
        // A client that offers ALPN without h2 is still refused.
        let http11 = try await sandbox.push(curlArguments: ["--http1.1"])
        #expect(http11.exitCode == 35, "\(http11)")
        #expect(http11.output.contains("no application protocol"), "\(http11)")
        // HTTP/1.1 without ALPN: the sandbox expects the HTTP/2 preface, so the connection ends
        // without an HTTP/1.1 answer.
        let plainHTTP11 = try await sandbox.push(curlArguments: ["--no-alpn", "--http1.1"])
        #expect(plainHTTP11.status == 0, "\(plainHTTP11)")
        let deliveries = try await sandbox.admin("GET", "/deliveries?token=\(SandboxProcess.token)")
        #expect((deliveries.json?["deliveries"] as? [Any])?.count == 1, "\(deliveries)")
    }

    /// APNSwift 5 and 6 sign `{"iss":"…","iat":"<digits>","kid":"…"}` with `"typ":"JWT"` in the header.
    @Test func apnswiftsProviderTokensAreAccepted() async throws {
        let sandbox = try await SandboxProcess(arguments: [
            "--public-key", "ABC123DEFG=\(Self.privateKey.publicKey.pemRepresentation)", "--key-team", "ABC123DEFG=DEF123GHIJ",
        ])
        let now = Int64(Date().timeIntervalSince1970)
        let apnswift = try Self.token(
            header: #"{"alg":"ES256","typ":"JWT","kid":"ABC123DEFG"}"#, claims: #"{"iss":"DEF123GHIJ","iat":"\#(now)","kid":"ABC123DEFG"}"#)
        let accepted = try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", "bearer \(apnswift)")])
        #expect(accepted.status == 200, "\(accepted)")

        let old = try Self.token(header: #"{"alg":"ES256","kid":"ABC123DEFG"}"#, claims: #"{"iss":"DEF123GHIJ","iat":"\#(now - 3700)"}"#)
        let expired = try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", "bearer \(old)")])
        #expect(expired.status == 403, "\(expired)")
        #expect(expired.reason == "ExpiredProviderToken", "\(expired)")

        let otherTeam = try Self.token(header: #"{"alg":"ES256","kid":"ABC123DEFG"}"#, claims: #"{"iss":"OTHER12345","iat":\#(now)}"#)
        let wrongTeam = try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", "bearer \(otherTeam)")])
        #expect(wrongTeam.status == 403, "\(wrongTeam)")
        #expect(wrongTeam.reason == "InvalidProviderToken", "\(wrongTeam)")

        let shortKid = try Self.token(header: #"{"alg":"ES256","kid":"ABC123"}"#, claims: #"{"iss":"DEF123GHIJ","iat":\#(now)}"#)
        let badKid = try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", "bearer \(shortKid)")])
        #expect(badKid.reason == "InvalidProviderToken", "\(badKid)")
    }

    @Test func aBadKeyTeamStopsTheStart() async throws {
        await #expect(throws: ChildProcessError.self) {
            _ = try await SandboxProcess(arguments: ["--key-team", "ABC123DEFG=short"])
        }
    }

    /// A JWT with the given header and claims JSON, signed with ``privateKey``.
    static func token(header: String, claims: String) throws -> String {
        func base64URL(_ bytes: some Sequence<UInt8>) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let input = "\(base64URL(header.utf8)).\(base64URL(claims.utf8))"
        let signature = try Self.privateKey.signature(for: Data(input.utf8))
        return "\(input).\(base64URL(signature.rawRepresentation))"
    }
}
