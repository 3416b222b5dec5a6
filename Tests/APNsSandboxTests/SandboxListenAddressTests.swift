import Foundation
import TestSupport
import Testing

/// `--host` and `--tls-name`, what compose needs to reach apns-sandbox from other containers: the
/// listeners bind the given address, and the generated certificate holds the given names. Checked
/// with the openssl command, a client nobody here wrote.
@Suite struct SandboxListenAddressTests {
    /// The server certificate's subjectAltName as `openssl s_client` sees it at `host:port`; nil when
    /// nothing answered TLS there.
    static func subjectAlternativeNames(host: String, port: Int) throws -> String? {
        let script = "openssl s_client -connect \(host):\(port) -alpn h2 </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName 2>/dev/null"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "timeout 10 sh -c '\(script)'"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return text.contains("Subject Alternative Name") ? text : nil
    }

    @Test func theDefaultListensOnLoopbackOnlyWithLocalNames() async throws {
        let sandbox = try await SandboxProcess()
        let names = try #require(try Self.subjectAlternativeNames(host: "127.0.0.1", port: sandbox.port))
        #expect(names.contains("DNS:localhost") && names.contains("IP Address:127.0.0.1"), "\(names)")
        // 127.0.0.2 is loopback too, but the listener is bound to 127.0.0.1 alone.
        #expect(try Self.subjectAlternativeNames(host: "127.0.0.2", port: sandbox.port) == nil)
        _ = await sandbox.terminate()
    }

    @Test func hostAndTLSNameMakeItReachableUnderAnotherName() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--host", "0.0.0.0", "--tls-name", "apns-sandbox", "--tls-name", "10.1.2.3"])
        // Bound to every address: 127.0.0.2 answers too, with a certificate for the extra names.
        let names = try #require(try Self.subjectAlternativeNames(host: "127.0.0.2", port: sandbox.port))
        #expect(names.contains("DNS:apns-sandbox") && names.contains("IP Address:10.1.2.3"), "\(names)")
        #expect(names.contains("DNS:localhost"), "\(names)")
        #expect(try await sandbox.admin("GET", "/healthz").status == 200)
        _ = await sandbox.terminate()
    }
}
