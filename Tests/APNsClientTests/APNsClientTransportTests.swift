import APNs
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

/// Concurrency, GOAWAY, drops, timeouts, back-pressure and TLS trust, against the built apns-sandbox.
@Suite("APNs client transport")
struct APNsClientTransportTests {
    @Test func goawayInTheMiddleOfFiveThousandInFlightLosesNothing() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"goaway_every":1000}"#).status == 200)
        let client = try makeClient(sandbox) { $0.connections = 2 }
        let tokens = (0..<5000).map { _ in TestTokens.random() }
        let results = await sendAll(client, tokens.map { alert($0) })
        let failures = results.compactMap { result -> APNsClientError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(results.allSatisfy { (try? $0.get().status) == 200 })
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["goaways"]) ?? 0 >= 4, "\(stats)")
        #expect(number(stats["delivered"]) == 5000, "each notification accepted exactly once: \(stats)")
        #expect(client.connectionsOpened >= 5)
        await client.shutdown()
    }

    /// A server that closes every connection with an error GOAWAY (here right after its first stream,
    /// `InvalidProviderToken` in the frame): the client still delivers (the stream the GOAWAY names is
    /// answered), hears each GOAWAY's reason, and reconnects no faster than its floor of one connection
    /// a second — where it used to reconnect at once, the loop Apple treats as an attack.
    @Test func errorGoawaysAreCountedByReasonAndReconnectsWaitForTheFloor() async throws {
        let sandbox = try await SandboxProcess()
        #expect(
            try await sandbox.admin("PUT", "/faults", body: #"{"goaway_every":1,"goaway_reason":"InvalidProviderToken"}"#).status == 200)
        let reasons = Mutex<[String: Int]>([:])
        let client = try makeClient(sandbox) {
            $0.connections = 1
            $0.onGoaway = { goaway in reasons.withLock { $0[goaway.metricLabel, default: 0] += 1 } }
        }
        let started = ContinuousClock.now
        for _ in 0..<4 {
            #expect(try await client.send(alert()).status == 200)
        }
        let elapsed = ContinuousClock.now - started
        #expect(client.connectionsOpened == 4, "\(client.connectionsOpened) connections")
        #expect(elapsed >= .milliseconds(2900), "4 connections one after the other took \(elapsed): not one per second")
        #expect(reasons.withLock { $0 } == ["InvalidProviderToken": 4], "\(reasons.withLock { $0 })")
        await client.shutdown()
    }

    /// An idle connection the server closes with a GOAWAY saying IdleTimeout: the client hears the
    /// reason and the next notification opens a new connection (that a routine close adds no backoff
    /// is the state machine's test; a wall-clock bound here would only measure the machine's load).
    @Test func anIdleTimeoutGoawayIsRoutine() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--idle-timeout-s", "1"])
        let reasons = Mutex<[String: Int]>([:])
        let client = try makeClient(sandbox) {
            $0.connections = 1
            $0.onGoaway = { goaway in reasons.withLock { $0[goaway.metricLabel, default: 0] += 1 } }
        }
        #expect(try await client.send(alert()).status == 200)
        try await eventually("the idle connection is closed", timeout: .seconds(10)) { client.openConnections == 0 }
        #expect(reasons.withLock { $0 } == ["IdleTimeout": 1], "\(reasons.withLock { $0 })")
        #expect(try await client.send(alert()).status == 200)
        #expect(client.connectionsOpened == 2)
        await client.shutdown()
    }

    @Test func carriesAThousandConcurrentStreamsOnOneConnection() async throws {
        let sandbox = try await SandboxProcess()
        // Every answer waits 1 s: 1000 streams in flight together finish in about 1 s; at the 100
        // streams a connection is commonly allowed, they would need 10 s. The bound leaves room for
        // a machine running every suite at once.
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":1000}"#).status == 200)
        let client = try makeClient(sandbox) { $0.connections = 1 }
        _ = try await client.send(alert())
        let started = ContinuousClock.now
        let results = await sendAll(client, (0..<1000).map { _ in alert(TestTokens.random()) })
        let elapsed = ContinuousClock.now - started
        #expect(results.allSatisfy { (try? $0.get().status) == 200 })
        #expect(elapsed < .seconds(5), "1000 streams took \(elapsed): they were not concurrent")
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["connections"]) == 1, "\(stats)")
        await client.shutdown()
    }

    @Test func connectionsOpenOnlyAsTheOpenOnesFillUp() async throws {
        let sandbox = try await SandboxProcess()
        // Answers after 300 ms, like a far server: the streams stay busy while the load arrives.
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":300}"#).status == 200)
        let client = try makeClient(sandbox) { $0.connections = 8 }
        _ = try await client.send(alert())
        // 200 at once fit in one connection's 1,000 streams: no second connection.
        var results = await sendAll(client, (0..<200).map { _ in alert(TestTokens.random()) })
        #expect(results.allSatisfy { (try? $0.get().status) == 200 })
        #expect(client.connectionsOpened == 1, "\(client.connectionsOpened) connections for 200 streams")
        // 2,500 at once need three.
        results = await sendAll(client, (0..<2500).map { _ in alert(TestTokens.random()) })
        #expect(results.allSatisfy { (try? $0.get().status) == 200 })
        #expect(
            (2...4).contains(client.connectionsOpened), "\(client.connectionsOpened) connections for 2,500 streams: more than one, far from all 8")
        await client.shutdown()
    }

    @Test func aDroppedConnectionFailsInFlightRequestsRetryablyAndReconnects() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"drop_every":300,"delay_ms":50}"#).status == 200)
        let client = try makeClient(sandbox) { $0.connections = 1 }
        let results = await sendAll(client, (0..<1000).map { _ in alert(TestTokens.random()) })
        var accepted = 0
        var lost = 0
        for result in results {
            switch result {
            case .success(let response):
                #expect(response.status == 200)
                accepted += 1
            case .failure(let error):
                #expect(error.code == .connectionLost, "\(error)")
                #expect(error.isRetryable)
                lost += 1
            }
        }
        #expect(accepted + lost == 1000)
        #expect(lost > 0, "the sandbox dropped connections with requests in flight")
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)
        #expect(try await client.send(alert()).status == 200)
        #expect(client.connectionsOpened >= 2, "a new connection replaced the dropped one")
        await client.shutdown()
    }

    /// The callback form's promise, one answer per request, through every way a request ends
    /// without a plain answer: connections reset with streams in flight, GOAWAY (the streams above it
    /// sent again), deadlines passed on a stream or in the queue, and a shutdown with streams in flight
    /// and requests queued. Each request's answers are counted (``AnswerLedger``), and the counts are
    /// read after `shutdown()` has returned: the connection threads that call the completions have
    /// exited, so no late second answer can be missed.
    @Test func everyRequestIsAnsweredExactlyOnceThroughDropsGoawaysTimeoutsAndShutdown() async throws {
        let sandbox = try await SandboxProcess()
        let client = try makeClient(sandbox) { $0.connections = 2 }

        // Resets and GOAWAYs: a connection is reset after every 200 answers, with the streams still in
        // flight cut off, and sent a GOAWAY after every 300 streams. Answers wait 20 ms, so a
        // connection has begun its 300th stream before its 200th answer (at loopback speed the reset
        // came first and no GOAWAY was ever sent). Every tenth request may wait only 30 ms: those
        // queued while the connections reconnect time out.
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"drop_every":200,"goaway_every":300,"delay_ms":20}"#).status == 200)
        let faults = AnswerLedger(requests: 1500)
        for index in 0..<1500 {
            let timeout: Duration = index % 10 == 0 ? .milliseconds(30) : .seconds(30)
            client.send(alert(TestTokens.random()), timeout: timeout, completion: faults.completion(index))
        }
        try await faults.waitUntilAllAnswered()
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["dropped_connections"]) ?? 0 >= 1, "\(stats)")
        #expect(number(stats["goaways"]) ?? 0 >= 1, "\(stats)")
        let (accepted, lost, queuedTooLong) = (faults.count(status: 200), faults.count(.connectionLost), faults.count(.timeout))
        #expect(lost > 0, "streams in flight were cut off by the resets: \(accepted) accepted, \(lost) lost")
        #expect(
            accepted + lost + queuedTooLong == 1500, "no other answers: \(accepted) accepted, \(lost) lost, \(queuedTooLong) timed out")
        #expect(number(stats["delivered"]) ?? 0 >= accepted, "every 200 the client reports came from the sandbox: \(stats)")

        // Deadlines on streams: answers take 1 s; half the requests may wait 300 ms.
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":1000}"#).status == 200)
        let slow = AnswerLedger(requests: 200)
        for index in 0..<200 {
            client.send(alert(TestTokens.random()), timeout: index % 2 == 0 ? .milliseconds(300) : .seconds(30), completion: slow.completion(index))
        }
        try await slow.waitUntilAllAnswered()
        #expect(
            slow.count(.timeout) == 100 && slow.count(status: 200) == 100, "\(slow.count(.timeout)) timed out, \(slow.count(status: 200)) accepted")
        await client.shutdown()

        // Shutdown with 1,000 streams in flight (answers after 30 s, past the 2 s shutdown grace that
        // follows from the request timeout) and 200 requests queued behind them.
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":30000}"#).status == 200)
        let stopping = try makeClient(sandbox) {
            $0.connections = 1
            $0.requestTimeout = .seconds(2)
        }
        let atShutdown = AnswerLedger(requests: 1200)
        for index in 0..<1200 {
            stopping.send(alert(TestTokens.random()), timeout: .seconds(60), completion: atShutdown.completion(index))
        }
        try await eventually("1,000 streams in flight, 200 queued") { stopping.pendingRequests == 200 }
        #expect(atShutdown.unanswered.count == 1200)
        await stopping.shutdown()
        #expect(atShutdown.unanswered.isEmpty, "shutdown() returned with \(atShutdown.unanswered.count) requests unanswered")
        let (cutOff, refused) = (atShutdown.count(.connectionLost), atShutdown.count(.shutdown))
        #expect(refused >= 200 && cutOff > 0 && cutOff + refused == 1200, "\(cutOff) cut off in flight, \(refused) refused")

        // Both clients have shut down: every completion that will ever run has run.
        for (phase, ledger) in [("faults", faults), ("slow", slow), ("shutdown", atShutdown)] {
            let twice = ledger.answeredMoreThanOnce
            #expect(twice.isEmpty, "\(phase): \(twice.count) requests answered more than once: \(twice.sorted { $0.key < $1.key }.prefix(10))")
        }
    }

    @Test func aSlowAnswerTimesOutAndFreesItsStream() async throws {
        let sandbox = try await SandboxProcess()
        let client = try makeClient(sandbox) { $0.connections = 1 }
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":3000}"#).status == 200)
        let started = ContinuousClock.now
        do {
            _ = try await client.send(alert(), timeout: .milliseconds(300))
            Issue.record("a 3 s answer beat a 300 ms timeout")
        } catch {
            #expect(error.code == .timeout)
            #expect(error.isRetryable)
        }
        // The timeout code already proves it did not wait for the 3 s answer; this bounds a hang.
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)
        #expect(try await client.send(alert()).status == 200)
        await client.shutdown()
    }

    @Test func aFullQueueIsBackPressureNotMemory() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":500}"#).status == 200)
        let client = try makeClient(sandbox) {
            $0.connections = 1
            $0.maximumPendingRequests = 50
        }
        _ = try await client.send(alert())
        // Callers outrun the connection: at most 50 wait in the queue, the rest are refused at once
        // (and every caller hears something).
        let results = await sendAll(client, (0..<1200).map { _ in alert(TestTokens.random()) })
        let overloaded = results.filter { if case .failure(let error) = $0 { error.code == .overloaded } else { false } }.count
        let accepted = results.filter { (try? $0.get().status) == 200 }.count
        #expect(overloaded > 0)
        #expect(accepted + overloaded == 1200)
        #expect(accepted >= 50)
        #expect(client.pendingRequests == 0)
        await client.shutdown()
    }

    @Test func anUntrustedServerIsRefused() async throws {
        let sandbox = try await SandboxProcess()
        var configuration = APNsClientConfiguration(
            endpoint: try APNsEndpoint(url: sandbox.endpointURL), credentials: .token(SandboxProcess.signingKey))
        configuration.requestTimeout = .seconds(10)
        let client = try APNsClient(configuration: configuration, logger: .init(label: "test"))
        do {
            _ = try await client.send(alert())
            Issue.record("a self-signed server was trusted without its CA")
        } catch {
            #expect(error.code == .connectFailed)
            #expect(error.message.contains("not trusted"), "\(error)")
        }
        await client.shutdown()

        let byName = try makeClient(sandbox) { $0.endpoint = APNsEndpoint(host: "localhost", port: sandbox.port) }
        #expect(try await byName.send(alert()).status == 200)
        await byName.shutdown()
    }

    /// The name is checked, not only the chain: a listening server whose certificate is signed by a
    /// trusted CA but names another host is refused, by name and by IP address.
    @Test func aTrustedCertificateForAnotherNameIsRefused() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-wrong-name-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = try Self.makeCertificate(named: "apns.invalid", in: directory)
        let sandbox = try await SandboxProcess(arguments: ["--tls-cert", files.certificate, "--tls-key", files.key], caFile: files.ca)
        for host in ["localhost", "127.0.0.1"] {
            let client = try makeClient(sandbox) { $0.endpoint = APNsEndpoint(host: host, port: sandbox.port) }
            do {
                _ = try await client.send(alert())
                Issue.record("\(host): a certificate for apns.invalid was accepted")
            } catch {
                #expect(error.code == .connectFailed)
                #expect(error.message.contains("not trusted") && error.message.lowercased().contains("mismatch"), "\(host): \(error)")
            }
            await client.shutdown()
        }
        // The same server, the same CA: only the name was wrong.
        let stats = try await sandbox.admin("GET", "/healthz")
        #expect(stats.status == 200)
    }

    /// A CA and a server certificate for `name` only (DNS), made with the openssl command.
    static func makeCertificate(named name: String, in directory: URL) throws -> (ca: String, certificate: String, key: String) {
        let path = { (file: String) in directory.appendingPathComponent(file).path }
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("ca.key"), "-out", path("ca.pem"),
                "-days", "2", "-subj", "/CN=wrong-name test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                "keyUsage=critical,keyCertSign",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("server.key"), "-out", path("server.csr"),
                "-subj", "/CN=\(name)",
            ],
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2",
                "-out", path("server.pem"), "-extfile", path("san.cnf"),
            ],
        ]
        try "subjectAltName=DNS:\(name)\nextendedKeyUsage=serverAuth\n".write(toFile: path("san.cnf"), atomically: true, encoding: .utf8)
        for arguments in steps {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw TestFailure("openssl \(arguments.prefix(2).joined(separator: " ")) failed") }
        }
        return (path("ca.pem"), path("server.pem"), path("server.key"))
    }

    @Test func nobodyListeningFailsFastAndRetryably() async throws {
        var configuration = APNsClientConfiguration(
            endpoint: APNsEndpoint(host: "127.0.0.1", port: TestServers.freePort()), credentials: .token(SandboxProcess.signingKey)
        )
        configuration.requestTimeout = .seconds(20)
        let client = try APNsClient(configuration: configuration, logger: .init(label: "test"))
        let started = ContinuousClock.now
        do {
            _ = try await client.send(alert())
            Issue.record("sent to a closed port")
        } catch {
            #expect(error.code == .connectFailed)
            #expect(error.isRetryable)
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        await client.shutdown()
        do {
            _ = try await client.send(alert())
            Issue.record("sent after shutdown")
        } catch {
            #expect(error.code == .shutdown)
        }
    }

    @Test func endpointsParseLikeApplesAndRefuseTheRest() throws {
        #expect(APNsEndpoint.production.authority == "api.push.apple.com")
        #expect(APNsEndpoint.development.authority == "api.sandbox.push.apple.com")
        #expect(try APNsEndpoint(url: "https://api.push.apple.com:2197").authority == "api.push.apple.com:2197")
        #expect(try APNsEndpoint(url: "https://127.0.0.1:2197") == APNsEndpoint(host: "127.0.0.1", port: 2197))
        #expect(try APNsEndpoint(url: "https://[::1]:2197").host == "::1")
        for bad in ["http://api.push.apple.com", "https://", "api.push.apple.com", "https://h/3/device", "https://h?x=1"] {
            #expect(throws: APNsClientError.self, "\(bad)") { try APNsEndpoint(url: bad) }
        }
    }
}
