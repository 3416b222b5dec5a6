import Foundation
import TestSupport
import Testing

/// apns-sandbox with what clients nobody here wrote send: no ALPN (aioapns). The built executable,
/// real TLS, curl as the client.
@Suite("apns-sandbox answers foreign clients the way Apple does")
struct SandboxFidelityTests {
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
}
