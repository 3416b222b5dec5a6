import APNs
import Crypto
import Foundation

/// The built `apns-sandbox` executable on free loopback ports, in a directory of its own, with
/// curl (HTTP/2 over TLS, trusting the generated CA) and admin API helpers.
public final class SandboxProcess: @unchecked Sendable {
    public let port: Int
    public let adminPort: Int
    public let directory: URL
    /// The CA the clients trust: the generated one (`--ca-out`) unless given.
    public let caFile: String
    public let process: ChildProcess

    public static let executable = TestServers.productsDirectory.appendingPathComponent("apns-sandbox").path
    public static let token = String(repeating: "ab", count: 32)
    /// ``signingKey``'s private key, PEM (PKCS#8, as Apple's `.p8` files hold it).
    public static let signingKeyPEM = P256.Signing.PrivateKey().pemRepresentation
    public static let signingKey = try! APNsSigningKey(p8: signingKeyPEM, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")

    /// `authorization` for a token signed with ``signingKey`` at `issuedAt` (default now).
    public static func bearer(_ key: APNsSigningKey = signingKey, issuedAt: Int64 = Int64(Date().timeIntervalSince1970)) -> String {
        "bearer \(try! key.providerToken(issuedAt: issuedAt))"
    }

    /// The headers of a notification that is accepted (with no `--public-key`, or with ``signingKey``'s).
    public static func headers(topic: String = "com.example.app", pushType: String = "alert") -> [(String, String)] {
        [("apns-topic", topic), ("apns-push-type", pushType), ("authorization", bearer())]
    }

    /// Writes ``signingKeyPEM`` to `AuthKey_ABC123DEFG.p8` in the sandbox's directory (for
    /// `pushctl --key-file`) and returns its path.
    public func writeSigningKeyFile() throws -> String {
        let path = directory.appendingPathComponent("AuthKey_\(Self.signingKey.keyID).p8").path
        try Data(Self.signingKeyPEM.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The sandbox's URL for clients: `https://127.0.0.1:<port>`.
    public var endpointURL: String { "https://127.0.0.1:\(port)" }

    /// Starts the sandbox and waits until its admin API answers.
    /// - Parameters:
    ///   - arguments: Extra flags.
    ///   - caFile: The CA clients trust; nil generates one (`--ca-out`).
    ///   - directory: Where the files go; a new temporary folder by default.
    public init(arguments: [String] = [], caFile: String? = nil, directory: URL? = nil) async throws {
        let directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("apns-sandbox-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        let generatesCA = caFile == nil
        let caFile = caFile ?? directory.appendingPathComponent("ca.pem").path
        self.caFile = caFile
        // A free port is free only until someone takes it: between choosing and binding, another
        // test's server or an outgoing connection may. Then the sandbox says "Address already in
        // use" and starts again on other ports (at most 5 tries).
        var tries = 0
        while true {
            tries += 1
            let (port, adminPort) = (TestServers.freePort(), TestServers.freePort())
            var command = [Self.executable, "--port", String(port), "--admin-port", String(adminPort), "--fault-seed", "1"]
            if generatesCA { command += ["--ca-out", caFile] }
            let process = try ChildProcess(command + arguments, environment: ["PUSH_LOG_LEVEL": "debug"])
            switch await Self.waitUntilUp(process, adminPort: adminPort, directory: directory) {
            case .up:
                self.port = port
                self.adminPort = adminPort
                self.process = process
                return
            case .exited where tries < 5 && process.output.contains("Address already in use"):
                continue
            case .exited(let status):
                throw ChildProcessError("apns-sandbox exited with \(status):\n\(process.output)")
            case .silent:
                process.signal(SIGKILL)
                throw ChildProcessError("apns-sandbox did not answer on its admin port within 15 s:\n\(process.output)")
            }
        }
    }

    private enum Start {
        case up
        case exited(Int32)
        case silent
    }

    /// Waits up to 15 s for the admin port's `/healthz`.
    private static func waitUntilUp(_ process: ChildProcess, adminPort: Int, directory: URL) async -> Start {
        for _ in 0..<150 {
            if let status = process.status { return .exited(status) }
            let health = try? await curl(
                url: "http://127.0.0.1:\(adminPort)/healthz", method: "GET", headers: [], body: nil, arguments: [], directory: directory)
            if health?.status == 200 { return .up }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return .silent
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    /// SIGTERM, then the exit code (nil if it did not exit within `timeout`).
    public func terminate(timeout: Duration = .seconds(15)) async -> Int32? {
        process.signal(SIGTERM)
        return await process.waitForExit(timeout: timeout)
    }

    /// One HTTP/2 request to the sandbox through curl.
    public func push(
        token: String = SandboxProcess.token,
        path: String? = nil,
        method: String = "POST",
        headers: [(String, String)] = SandboxProcess.headers(),
        body: String? = #"{"aps":{"alert":"hello"}}"#,
        curlArguments: [String] = []
    ) async throws -> CurlResult {
        try await Self.curl(
            url: "https://127.0.0.1:\(port)\(path ?? "/3/device/\(token)")",
            method: method,
            headers: headers,
            body: body,
            arguments: ["--http2", "--cacert", caFile] + curlArguments,
            directory: directory
        )
    }

    /// One admin API request.
    public func admin(_ method: String, _ path: String, body: String? = nil) async throws -> CurlResult {
        try await Self.curl(url: "http://127.0.0.1:\(adminPort)\(path)", method: method, headers: [], body: body, arguments: [], directory: directory)
    }

    public static func curl(
        url: String, method: String, headers: [(String, String)], body: String?, arguments: [String], directory: URL
    ) async throws -> CurlResult {
        let id = UUID().uuidString
        let headerFile = directory.appendingPathComponent("h-\(id)").path
        let bodyFile = directory.appendingPathComponent("b-\(id)").path
        defer {
            try? FileManager.default.removeItem(atPath: headerFile)
            try? FileManager.default.removeItem(atPath: bodyFile)
        }
        var command = ["/usr/bin/curl", "-sS", "--max-time", "20", "-X", method, "-D", headerFile, "-o", bodyFile] + arguments
        for (name, value) in headers { command += ["-H", "\(name): \(value)"] }
        if let body {
            let requestFile = directory.appendingPathComponent("r-\(id)").path
            try Data(body.utf8).write(to: URL(fileURLWithPath: requestFile))
            command += ["--data-binary", "@\(requestFile)"]
        }
        command.append(url)
        let child = try ChildProcess(command)
        let exitCode = await child.waitForExit()
        let headerText = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
        let bodyText = (try? String(contentsOfFile: bodyFile, encoding: .utf8)) ?? ""
        return CurlResult(exitCode: exitCode, headerText: headerText, body: bodyText, output: child.output)
    }
}

/// What curl got.
public struct CurlResult: CustomStringConvertible {
    public let exitCode: Int32
    /// The status of the last response (0 when none arrived).
    public let status: Int
    /// Lowercased names.
    public let headers: [String: String]
    public let body: String
    /// curl's own messages.
    public let output: String

    public init(exitCode: Int32, headerText: String, body: String, output: String) {
        self.exitCode = exitCode
        self.body = body
        self.output = output
        var status = 0
        var headers: [String: String] = [:]
        for line in headerText.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("HTTP/") {
                status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
                headers = [:]
            } else if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        self.status = status
        self.headers = headers
    }

    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
    }

    public var reason: String? { json?["reason"] as? String }

    public var description: String { "exit \(exitCode), status \(status), headers \(headers), body \(body), curl: \(output)" }
}

/// Integers in JSON answers.
public func number(_ value: Any?) -> Int? {
    (value as? NSNumber)?.intValue
}
