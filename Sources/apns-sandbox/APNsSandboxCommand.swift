import ArgumentParser
import Foundation

/// The APNs-compatible HTTP/2 server for local runs, tests and benchmarks (CONTRACT.md, "apns-sandbox").
///
/// The flags are the contract's; the server itself lands with the APNs client work.
@main
struct APNsSandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-sandbox",
        abstract: "An APNs-compatible HTTP/2 server (TLS, ALPN h2) for local runs, tests and benchmarks.",
        discussion: """
            Answers like APNs (paths, headers, JWT and certificate auth, status codes and reasons), records
            deliveries, and takes fault injection through its admin API on --admin-port:
              GET /deliveries?token=&app=&since=, DELETE /deliveries, PUT /tokens/{token},
              PUT /faults, DELETE /faults, GET /stats.
            """
    )

    @Option(help: "HTTP/2 (TLS) port.")
    var port: Int = 2197

    @Option(help: "Admin HTTP/1.1 JSON API port.")
    var adminPort: Int = 2198

    @Option(help: "Server certificate (PEM). Without it a self-signed CA and certificate are made.")
    var tlsCert: String?

    @Option(help: "Server private key (PEM), with --tls-cert.")
    var tlsKey: String?

    @Option(help: "Where to write the generated CA certificate, for clients' PUSH_APNS_CA_FILE.")
    var caOut: String?

    @Option(help: "KEYID=PEM: verify JWTs with this kid against this public key (repeatable).")
    var publicKey: [String] = []

    @Option(help: "CA (PEM) whose client certificates are accepted for certificate auth.")
    var clientCa: String?

    func validate() throws {
        for (name, value) in [("--port", port), ("--admin-port", adminPort)] where !(1...65535).contains(value) {
            throw ValidationError("\(name) \(value) is not a port number (1–65535)")
        }
        if (tlsCert == nil) != (tlsKey == nil) {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
        for entry in publicKey where !entry.contains("=") {
            throw ValidationError("--public-key '\(entry)' must be KEYID=PEM")
        }
    }

    func run() async throws {
        FileHandle.standardError.write(Data("apns-sandbox: the HTTP/2 server is not part of this build yet (it lands with the APNs client work)\n".utf8))
        throw ExitCode(3)
    }
}
