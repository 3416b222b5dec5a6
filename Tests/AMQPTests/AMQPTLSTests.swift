import AMQP
import Foundation
import TestSupport
import Testing

/// AMQPS against the shared RabbitMQ's TLS listener (`scripts/rabbitmq.sh --tls-port`, 127.0.0.1:5711).
///
/// Its server certificate is signed by the instance's own CA (`TestServers.tlsDirectory`) and names
/// `DNS:localhost` only. The listener requires a client certificate from the same CA (`client.pem`,
/// which every test that means to connect presents): a client that sends none is refused, and
/// `rabbitmqctl list_connections` names the certificate a connection came with.
///
/// Host-name verification is tested by connecting to `127.0.0.1` instead: the same listener, an
/// address always there, and not in the certificate. (An alias such as `localhost.localdomain` is
/// not in every /etc/hosts, and a second loopback address would need a second listener.) The
/// certificate carries no `IP:127.0.0.1` on purpose: rabbitmq-c 0.11 only compares DNS names, so an
/// IP entry would never help it, and without one the test holds for any client version.
@Suite struct AMQPTLSTests {
    private var tlsPort: Int {
        (try? AMQPConfiguration(url: TestServers.amqpsURL, connectionName: "x").port) ?? 5711
    }

    private var plainPort: Int {
        (try? AMQPConfiguration(url: TestServers.amqpURL, connectionName: "x").port) ?? 5712
    }

    private var caFile: String { "\(TestServers.tlsDirectory)/ca.pem" }
    private var clientCertificate: String { "\(TestServers.tlsDirectory)/client.pem" }
    private var clientKey: String { "\(TestServers.tlsDirectory)/client.key" }

    @Test func publishesWithConfirmsAndConsumesOverTLS() async throws {
        let queue = TestServers.uniqueName("amqps.roundtrip")
        try await withAMQPConnection(url: TestServers.amqpsURL, name: "tls-roundtrip", topology: quorumQueue(queue)) { connection in
            #expect(connection.configuration.tls?.caCertificateFile != nil)
            #expect(connection.configuration.port != plainPort)

            // Small messages and one larger than a frame (128 KiB), so records and frames split.
            let big = String(repeating: "0123456789abcdef", count: 20_000)
            let texts = (0..<100).map { "tls-\($0)" } + [big]
            let results = await connection.publish(texts.map { message($0, to: queue) })
            let failures = results.filter { if case .failure = $0 { true } else { false } }
            #expect(failures.isEmpty, "publishes failed: \(failures.prefix(3))")

            let consumer = connection.consume(queue: queue, prefetch: 50)
            let received = try await within(.seconds(20), "consuming \(texts.count) messages over TLS") { [consumer] in
                var received: [String] = []
                for try await delivery in consumer {
                    received.append(delivery.text)
                    delivery.ack()
                    if received.count == texts.count { break }
                }
                return received
            }
            consumer.cancel()
            #expect(received.count == texts.count)
            #expect(received.sorted() == texts.sorted())
            #expect(received.last?.count == big.count)
            try await connection.deleteQueue(queue)
        }
    }

    @Test func aClientCertificateFromTheBrokersCAIsAccepted() async throws {
        let url = tlsURL(host: "localhost", port: tlsPort, ["cacertfile": caFile, "certfile": clientCertificate, "keyfile": clientKey])
        let queue = TestServers.uniqueName("amqps.client-cert")
        let name = TestServers.uniqueName("tls-client-cert")
        try await withAMQPConnection(url: url, name: name, topology: quorumQueue(queue)) { connection in
            #expect(connection.configuration.tls?.certificateFile?.hasSuffix("client.pem") == true)
            #expect(connection.isConnected)
            try await connection.publish(message("with a client certificate", to: queue))
            #expect(try await connection.queueStatus(queue).messages == 1)
            // The broker's view: this connection came with the client certificate, verified against
            // the broker's CA (the listener refuses connections without one, see the next tests).
            let presented = try #require(try await brokerPeerCertificates()[name], "the broker lists the connection with a certificate")
            #expect(presented.subject == (try certificateName("-subject", of: clientCertificate)), "\(presented)")
            #expect(presented.issuer == (try certificateName("-issuer", of: clientCertificate)), "\(presented)")
            try await connection.deleteQueue(queue)
        }
    }

    @Test func aClientWithoutACertificateIsRefused() async throws {
        // The same listener, CA and host as the test above; only the client certificate is missing.
        let (error, elapsed) = await connectionError(tlsURL(host: "localhost", port: tlsPort, ["cacertfile": caFile]), name: "tls-no-client-cert")
        #expect(error != nil, "connected without a client certificate")
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.isRetryable == false, "\(String(describing: error))")
        #expect(error?.message.contains("localhost:\(tlsPort)") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(6))
    }

    @Test func aClientCertificateTheBrokerDoesNotTrustIsRefused() async throws {
        let rogue = try RogueCA()
        defer { rogue.remove() }
        let url = tlsURL(
            host: "localhost", port: tlsPort,
            [
                "cacertfile": caFile, "certfile": rogue.certificate, "keyfile": rogue.key,
            ])
        let (error, elapsed) = await connectionError(url, name: "tls-rogue-client")
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.isRetryable == false)
        #expect(error?.message.contains("localhost:\(tlsPort)") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(6))
    }

    @Test func aBrokerCertificateFromAnotherCAIsRefused() async throws {
        let rogue = try RogueCA()
        defer { rogue.remove() }
        let (error, elapsed) = await connectionError(
            tlsURL(host: "localhost", port: tlsPort, ["cacertfile": rogue.certificate, "certfile": clientCertificate, "keyfile": clientKey]),
            name: "tls-rogue-ca"
        )
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.isRetryable == false)
        #expect(error?.message.contains("localhost:\(tlsPort)") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(6))
    }

    @Test func theHostNameMustBeInTheBrokersCertificate() async throws {
        // The same listener, CA and client certificate: by name it works …
        let options: KeyValuePairs = ["cacertfile": caFile, "certfile": clientCertificate, "keyfile": clientKey]
        try await withAMQPConnection(url: tlsURL(host: "localhost", port: tlsPort, options), name: "tls-by-name") { connection in
            #expect(connection.isConnected)
        }
        // … by address (not in the certificate) it must not.
        let (error, elapsed) = await connectionError(tlsURL(host: "127.0.0.1", port: tlsPort, options), name: "tls-by-address")
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.message.contains("127.0.0.1:\(tlsPort)") == true, "\(String(describing: error))")
        #expect(error?.message.localizedCaseInsensitiveContains("hostname") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(6))
    }

    @Test func amqpsToThePlainPortFailsWithinTheConnectTimeout() async throws {
        let (error, elapsed) = await connectionError(
            tlsURL(host: "localhost", port: plainPort, ["cacertfile": caFile, "connection_timeout": "2000"]),
            name: "tls-to-plain-port"
        )
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.message.contains("localhost:\(plainPort)") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(4), "failed after \(elapsed)")
    }

    @Test func aMissingCAFileIsNamed() async throws {
        let missing = "\(TestServers.tlsDirectory)/no-such-ca.pem"
        let (error, _) = await connectionError(tlsURL(host: "localhost", port: tlsPort, ["cacertfile": missing]), name: "tls-no-ca")
        #expect(error?.code == .tlsFailed, "\(String(describing: error))")
        #expect(error?.message.contains(missing) == true, "\(String(describing: error))")
    }

    // MARK: Helpers

    /// `amqps://guest:guest@HOST:PORT/%2f?…` with each option value percent-encoded.
    private func tlsURL(host: String, port: Int, _ options: KeyValuePairs<String, String>) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "/._~-")
        let query = options.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.value)" }
        return "amqps://guest:guest@\(host):\(port)/%2f?\(query.joined(separator: "&"))"
    }

    /// The broker's view of its TLS client connections (`rabbitmqctl list_connections`), by the
    /// client's connection name: the subject and issuer of the certificate each presented, as
    /// RFC 2253 names (`CN=…`); connections without a certificate are left out.
    private func brokerPeerCertificates() async throws -> [String: (subject: String, issuer: String)] {
        let listing = try await TestServers.sharedBroker.rabbitmqctl([
            "-q", "list_connections", "--no-table-headers", "ssl", "peer_cert_subject", "peer_cert_issuer", "client_properties",
        ])
        var certificates: [String: (subject: String, issuer: String)] = [:]
        for line in listing.split(whereSeparator: \.isNewline) {
            // client_properties, last, holds {"connection_name","NAME"} among the client's other properties.
            let fields = line.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4, fields[0] == "true", !fields[1].isEmpty,
                let range = fields[3].range(of: #"\{"connection_name","([^"]*)"\}"#, options: .regularExpression)
            else { continue }
            let name = fields[3][range].dropFirst(#"{"connection_name",""#.count).dropLast(2)
            certificates[String(name)] = (fields[1], fields[2])
        }
        return certificates
    }

    /// `-subject` or `-issuer` of a PEM certificate as an RFC 2253 name (`openssl x509`).
    private func certificateName(_ field: String, of file: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "x509", "-noout", field, "-nameopt", "RFC2253", "-in", file]
        let output = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let prefix = "\(field.dropFirst())="
        guard process.terminationStatus == 0, text.hasPrefix(prefix) else {
            throw TestFailure("openssl x509 \(field) \(file) exited with \(process.terminationStatus): \(text)")
        }
        return String(text.dropFirst(prefix.count)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The error `waitUntilConnected` throws for `url` (nil, recorded as an issue, if it connects) and
    /// how long it took.
    private func connectionError(_ url: String, name: String) async -> (AMQPError?, Duration) {
        let connection: AMQPConnection
        do {
            connection = AMQPConnection(configuration: try AMQPConfiguration(url: url, connectionName: name), logger: TestLogger.make("amqp-test"))
        } catch {
            Issue.record(error, "invalid test URL \(url)")
            return (nil, .zero)
        }
        let started = ContinuousClock.now
        do {
            try await connection.waitUntilConnected(timeout: .seconds(5))
            let elapsed = ContinuousClock.now - started
            Issue.record("\(url) connected; expected it to fail")
            await connection.close()
            return (nil, elapsed)
        } catch {
            let elapsed = ContinuousClock.now - started
            await connection.close()
            return (error, elapsed)
        }
    }
}

/// A self-signed CA made for one test with the `openssl` CLI, in a temporary directory: it signed
/// nothing the broker has, and the broker does not trust it.
private struct RogueCA {
    let directory: String
    var certificate: String { "\(directory)/rogue-ca.pem" }
    var key: String { "\(directory)/rogue-ca.key" }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("amqp-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A short-lived child that exits by itself, so Foundation's Process is fine here (see
        // LocalServer for why it is not for servers). `-config /dev/null`: no system openssl.cnf needed.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=push rogue test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "subjectAltName=DNS:localhost",
            "-config", "/dev/null",
        ]
        let log = "\(directory)/openssl.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? output.close() }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0, FileManager.default.fileExists(atPath: certificate) else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            remove()
            throw RogueCAError(description: "openssl req exited with \(process.terminationStatus): \(text)")
        }
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

private struct RogueCAError: Error, CustomStringConvertible {
    let description: String
}
