import APNs
import Crypto
import Foundation
import TestSupport
import Testing

import struct PushCore.PushType

/// apns-sandbox as clients and ops use it: the built executable, real TLS, real HTTP/2 (curl and
/// nghttp), the admin API over HTTP/1.1.
@Suite("apns-sandbox over TLS and HTTP/2")
struct SandboxServerTests {
    @Test func acceptsANotificationAndRecordsIt() async throws {
        let sandbox = try await SandboxProcess()
        let accepted = try await sandbox.push(headers: SandboxProcess.headers() + [("apns-priority", "10"), ("apns-collapse-id", "c1")])
        #expect(accepted.status == 200, "\(accepted)")
        let apnsID = try #require(accepted.headers["apns-id"])
        #expect(UUID(uuidString: apnsID) != nil)
        #expect(UUID(uuidString: accepted.headers["apns-unique-id"] ?? "") != nil)
        #expect(accepted.body.isEmpty)

        // A given apns-id is echoed.
        let given = "eabeae54-14a8-11e5-b60b-1697f925ec7b"
        let echoed = try await sandbox.push(headers: SandboxProcess.headers() + [("apns-id", given)])
        #expect(echoed.headers["apns-id"] == given)

        let recorded = try await sandbox.admin("GET", "/deliveries?token=\(SandboxProcess.token)")
        let deliveries = try #require(recorded.json?["deliveries"] as? [[String: Any]])
        #expect(deliveries.count == 2)
        let first = deliveries[0]
        #expect(first["token"] as? String == SandboxProcess.token)
        #expect(first["topic"] as? String == "com.example.app")
        let headers = try #require(first["headers"] as? [String: String])
        #expect(headers["apns-collapse-id"] == "c1")
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["authorization"] == nil)
        #expect(((first["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String == "hello")
        let receivedAt = try #require(number(first["received_at"]))
        #expect(abs(Double(receivedAt) / 1000 - Date().timeIntervalSince1970) < 60)
    }

    @Test func answersEachClassOfBadRequestLikeAPNs() async throws {
        let sandbox = try await SandboxProcess()
        let cases: [(String, SandboxProcess, () async throws -> CurlResult, Int, String)] = [
            ("GET", sandbox, { try await sandbox.push(method: "GET", body: nil) }, 405, "MethodNotAllowed"),
            ("bad path", sandbox, { try await sandbox.push(path: "/3/devices/x") }, 404, "BadPath"),
            ("no token", sandbox, { try await sandbox.push(path: "/3/device/") }, 400, "MissingDeviceToken"),
            ("short token", sandbox, { try await sandbox.push(token: "abcd") }, 400, "BadDeviceToken"),
            ("no JWT", sandbox, { try await sandbox.push(headers: [("apns-topic", "com.example.app")]) }, 403, "MissingProviderToken"),
            (
                "bad JWT", sandbox, { try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", "bearer x.y.z")]) }, 403,
                "InvalidProviderToken"
            ),
            ("no topic", sandbox, { try await sandbox.push(headers: [("authorization", SandboxProcess.bearer())]) }, 400, "MissingTopic"),
            ("voip topic", sandbox, { try await sandbox.push(headers: SandboxProcess.headers(pushType: "voip")) }, 400, "BadTopic"),
            ("push type", sandbox, { try await sandbox.push(headers: SandboxProcess.headers(pushType: "banner")) }, 400, "InvalidPushType"),
            ("priority", sandbox, { try await sandbox.push(headers: SandboxProcess.headers() + [("apns-priority", "7")]) }, 400, "BadPriority"),
            (
                "expiration", sandbox, { try await sandbox.push(headers: SandboxProcess.headers() + [("apns-expiration", "soon")]) }, 400,
                "BadExpirationDate"
            ),
            (
                "collapse id", sandbox,
                { try await sandbox.push(headers: SandboxProcess.headers() + [("apns-collapse-id", String(repeating: "x", count: 65))]) }, 400,
                "BadCollapseId"
            ),
            ("apns-id", sandbox, { try await sandbox.push(headers: SandboxProcess.headers() + [("apns-id", "123")]) }, 400, "BadMessageId"),
            ("empty", sandbox, { try await sandbox.push(body: nil) }, 400, "PayloadEmpty"),
            ("not JSON", sandbox, { try await sandbox.push(body: "hello") }, 400, "PayloadEmpty"),
            ("too large", sandbox, { try await sandbox.push(body: #"{"a":"\#(String(repeating: "x", count: 4100))"}"#) }, 413, "PayloadTooLarge"),
        ]
        for (name, _, send, status, reason) in cases {
            let result = try await send()
            #expect(result.status == status, "\(name): \(result)")
            #expect(result.reason == reason, "\(name): \(result)")
            #expect(result.headers["apns-id"] != nil, "\(name): \(result)")
        }
        // Two of the same header: curl sends both.
        let duplicate = try await sandbox.push(headers: SandboxProcess.headers() + [("x-a", "1"), ("x-a", "2")])
        #expect(duplicate.reason == "DuplicateHeaders", "\(duplicate)")
        let voip = try await sandbox.push(
            headers: SandboxProcess.headers(topic: "com.example.app.voip", pushType: "voip"),
            body: #"{"a":"\#(String(repeating: "x", count: 5000))"}"#)
        #expect(voip.status == 200, "\(voip)")

        let stats = try await sandbox.admin("GET", "/stats")
        #expect(number(stats.json?["requests"]) == cases.count + 2)
        #expect(number(stats.json?["delivered"]) == 1)
        #expect(number((stats.json?["by_status"] as? [String: Any])?["400"]) == 12)
        #expect(number((stats.json?["by_reason"] as? [String: Any])?["PayloadEmpty"]) == 2)
        let recorded = try await sandbox.admin("GET", "/deliveries")
        #expect((recorded.json?["deliveries"] as? [Any])?.count == 1)
    }

    @Test func verifiesProviderTokensAgainstConfiguredKeys() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sandbox-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keyFile = directory.appendingPathComponent("key.pem")
        try Data(SandboxProcess.signingKey.publicKeyPEM.utf8).write(to: keyFile)
        let sandbox = try await SandboxProcess(arguments: ["--public-key", "ABC123DEFG=\(keyFile.path)"], directory: directory)

        let valid = try await sandbox.push()
        #expect(valid.status == 200, "\(valid)")

        let impostor = try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let wrongKey = try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", SandboxProcess.bearer(impostor))])
        #expect(wrongKey.status == 403, "\(wrongKey)")
        #expect(wrongKey.reason == "InvalidProviderToken")

        let otherKid = try APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "XYZ123DEFG", teamID: "DEF123GHIJ")
        let unknownKid = try await sandbox.push(headers: [("apns-topic", "com.example.app"), ("authorization", SandboxProcess.bearer(otherKid))])
        #expect(unknownKid.reason == "InvalidProviderToken", "\(unknownKid)")

        let hourAndMore = Int64(Date().timeIntervalSince1970) - 3700
        let expired = try await sandbox.push(headers: [
            ("apns-topic", "com.example.app"), ("authorization", SandboxProcess.bearer(issuedAt: hourAndMore)),
        ])
        #expect(expired.status == 403, "\(expired)")
        #expect(expired.reason == "ExpiredProviderToken")
    }

    /// A Live Activity token takes only liveactivity pushes, on the `.push-type.liveactivity` topic;
    /// anything else is `DeviceTokenNotForTopic`, as Apple answers a provider that sends an activity's
    /// token with the app's plain topic.
    @Test func aLiveActivityTokenTakesOnlyLiveActivityPushes() async throws {
        let sandbox = try await SandboxProcess()
        let activity = TestTokens.random()
        let marked = try await sandbox.admin("PUT", "/tokens/\(activity)", body: #"{"state":"liveactivity"}"#)
        #expect(marked.status == 200 && marked.json?["state"] as? String == "liveactivity", "\(marked)")
        let alert = try await sandbox.push(token: activity)
        #expect(alert.status == 400, "\(alert)")
        #expect(alert.reason == "DeviceTokenNotForTopic")
        let update = try await sandbox.push(
            token: activity, headers: SandboxProcess.headers(topic: "com.example.app.push-type.liveactivity", pushType: "liveactivity"),
            body: #"{"aps":{"timestamp":1767225600,"event":"update","content-state":{"score":"1:0"}}}"#)
        #expect(update.status == 200, "\(update)")
        #expect(try await sandbox.admin("GET", "/tokens/\(activity)").json?["state"] as? String == "liveactivity")
    }

    @Test func tokenStatesSetThroughTheAdminAPI() async throws {
        let sandbox = try await SandboxProcess()
        let gone = TestTokens.random()
        let bad = TestTokens.random()
        let set = try await sandbox.admin("PUT", "/tokens/\(gone)", body: #"{"state":"unregistered","timestamp":1700000000123}"#)
        #expect(set.status == 200, "\(set)")
        #expect(set.json?["state"] as? String == "unregistered")
        #expect(try await sandbox.admin("PUT", "/tokens/\(bad.uppercased())", body: #"{"state":"bad"}"#).status == 200)

        let unregistered = try await sandbox.push(token: gone)
        #expect(unregistered.status == 410, "\(unregistered)")
        #expect(unregistered.reason == "Unregistered")
        #expect(number(unregistered.json?["timestamp"]) == 1_700_000_000_123)
        let refused = try await sandbox.push(token: bad)
        #expect(refused.status == 400)
        #expect(refused.reason == "BadDeviceToken")
        #expect(try await sandbox.push().status == 200)

        let read = try await sandbox.admin("GET", "/tokens/\(bad)")
        #expect(read.json?["state"] as? String == "bad", "\(read)")
        #expect(try await sandbox.admin("PUT", "/tokens/\(gone)", body: #"{"state":"active"}"#).status == 200)
        #expect(try await sandbox.push(token: gone).status == 200)

        let missingTimestamp = try await sandbox.admin("PUT", "/tokens/\(gone)", body: #"{"state":"unregistered"}"#)
        #expect(missingTimestamp.status == 400)
        #expect(missingTimestamp.json?["field"] as? String == "timestamp")
        let badToken = try await sandbox.admin("PUT", "/tokens/xyz", body: #"{"state":"bad"}"#)
        #expect(badToken.status == 400)
        #expect(badToken.json?["field"] as? String == "token")
        let badState = try await sandbox.admin("PUT", "/tokens/\(gone)", body: #"{"state":"zombie"}"#)
        #expect(badState.json?["field"] as? String == "state")
    }

    @Test func injectsStatusFaultsAndDelays() async throws {
        let sandbox = try await SandboxProcess()
        let set = try await sandbox.admin("PUT", "/faults", body: #"{"status":503,"rate":1.0}"#)
        #expect(set.status == 200, "\(set)")
        #expect((set.json?["faults"] as? [[String: Any]])?.first?["status"] as? Int == 503)
        let unavailable = try await sandbox.push()
        #expect(unavailable.status == 503, "\(unavailable)")
        #expect(unavailable.reason == "ServiceUnavailable")
        // A bad request is still judged first.
        #expect(try await sandbox.push(token: "00").reason == "BadDeviceToken")

        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"status":503,"rate":0}"#).status == 200)
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"status":429,"rate":1}"#).status == 200)
        #expect(try await sandbox.push().reason == "TooManyRequests")
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)
        #expect(try await sandbox.push().status == 200)

        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":400}"#).status == 200)
        let started = ContinuousClock.now
        let delayed = try await sandbox.push()
        #expect(delayed.status == 200)
        #expect(ContinuousClock.now - started >= .milliseconds(400))

        let invalid = try await sandbox.admin("PUT", "/faults", body: #"{"status":503,"rate":2}"#)
        #expect(invalid.status == 400)
        #expect(invalid.json?["field"] as? String == "rate")
        let listed = try await sandbox.admin("GET", "/faults")
        #expect((listed.json?["faults"] as? [[String: Any]])?.first?["delay_ms"] as? Int == 400)

        let stats = try await sandbox.admin("GET", "/stats")
        let byReason = stats.json?["by_reason"] as? [String: Any]
        #expect(number(byReason?["ServiceUnavailable"]) == 1)
        #expect(number(byReason?["TooManyRequests"]) == 1)
    }

    @Test func goawayEveryNStreamsNeverProcessesLaterStreams() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"goaway_every":2}"#).status == 200)
        let payload = sandbox.directory.appendingPathComponent("payload.json")
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: payload)
        // Five requests on one connection, streams 1, 3, 5, 7, 9 (distinct URLs: nghttp merges repeats).
        var command = ["/usr/bin/nghttp", "-nv", "--no-dep", "-d", payload.path]
        for (name, value) in SandboxProcess.headers() { command += ["-H", "\(name): \(value)"] }
        command += (0..<5).map { _ in "https://127.0.0.1:\(sandbox.port)/3/device/\(TestTokens.random())" }
        let nghttp = try ChildProcess(command)
        _ = await nghttp.waitForExit()
        let output = nghttp.output
        #expect(output.contains("recv GOAWAY frame"), "\(output)")
        #expect(output.contains("last_stream_id=3"), "\(output)")
        #expect(output.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1000"), "\(output)")
        #expect(output.components(separatedBy: "REFUSED_STREAM").count - 1 == 3, "\(output)")
        #expect(output.components(separatedBy: ":status: 200").count - 1 == 2, "\(output)")

        let deliveries = try await sandbox.admin("GET", "/deliveries")
        #expect((deliveries.json?["deliveries"] as? [Any])?.count == 2, "\(deliveries)")
        let stats = try await sandbox.admin("GET", "/stats")
        #expect(number(stats.json?["goaways"]) == 1)
        #expect(number(stats.json?["requests"]) == 2)

        // The next connection serves again.
        #expect(try await sandbox.push().status == 200)
    }

    @Test func dropEveryNResetsTheConnection() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"drop_every":1}"#).status == 200)
        let dropped = try await sandbox.push()
        #expect(dropped.exitCode != 0, "\(dropped)")
        #expect(dropped.status == 0)
        let stats = try await sandbox.admin("GET", "/stats")
        #expect(number(stats.json?["dropped_connections"]) == 1)
        #expect(number(stats.json?["delivered"]) == 0)
    }

    @Test func anAnswerTheClientGaveUpWaitingForCountsAsLost() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":3000}"#).status == 200)
        let gaveUp = try await sandbox.push(curlArguments: ["--max-time", "0.5"])
        #expect(gaveUp.status == 0, "\(gaveUp)")
        try await Task.sleep(for: .milliseconds(300))
        let stats = try await sandbox.admin("GET", "/stats")
        // Accepted (recorded as delivered) but never answered: a retry would deliver it twice.
        #expect(number(stats.json?["delivered"]) == 1, "\(stats)")
        #expect(number(stats.json?["lost_answers"]) == 1, "\(stats)")
    }

    @Test func answersWrittenInFullAreNotLostWithoutConfirmation() async throws {
        let sandbox = try await SandboxProcess()
        for _ in 0..<2 { #expect(try await sandbox.push().status == 200) }
        let stats = try await sandbox.admin("GET", "/stats")
        // curl closes without a GOAWAY: aborted, but its answers had been written.
        #expect(number(stats.json?["aborted_connections"]) == 2, "\(stats)")
        #expect(number(stats.json?["lost_answers"]) == 0, "\(stats)")
    }

    @Test func withConfirmationOnlyAnswersNoPingCoveredAreLost() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--confirm-answers"])
        // Three requests in turn on one connection; curl acknowledges the PING that follows each
        // answer when it sends the next request, then closes without a GOAWAY after the third.
        let more = (0..<2).map { _ in "https://127.0.0.1:\(sandbox.port)/3/device/\(TestTokens.random())" }
        let pushed = try await sandbox.push(token: TestTokens.random(), curlArguments: more)
        #expect(pushed.exitCode == 0, "\(pushed)")
        try await Task.sleep(for: .milliseconds(300))
        let stats = try await sandbox.admin("GET", "/stats")
        #expect(number(stats.json?["delivered"]) == 3, "\(stats)")
        #expect(number(stats.json?["aborted_connections"]) == 1, "\(stats)")
        // Only the last answer went unconfirmed; without the PINGs all three would count.
        #expect(number(stats.json?["lost_answers"]) == 1, "\(stats)")
    }

    @Test func refusesClientsThatDoNotOfferH2() async throws {
        let sandbox = try await SandboxProcess()
        let http11 = try await sandbox.push(curlArguments: ["--http1.1"])
        #expect(http11.exitCode == 35, "\(http11)")
        #expect(http11.output.contains("no application protocol"), "\(http11)")
        #expect(try await sandbox.push().status == 200)
    }

    @Test func tlsVersions() async throws {
        let sandbox = try await SandboxProcess()
        let tls12 = try await sandbox.push(curlArguments: ["--tlsv1.2", "--tls-max", "1.2"])
        #expect(tls12.status == 200, "\(tls12)")
        let tls13 = try await sandbox.push(curlArguments: ["--tlsv1.3"])
        #expect(tls13.status == 200, "\(tls13)")
        let tls11 = try await sandbox.push(curlArguments: ["--tlsv1.1", "--tls-max", "1.1"])
        #expect(tls11.exitCode == 35, "\(tls11)")
    }

    @Test func recordLimitKeepsTheNewestWithExactCounts() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--record-limit", "2"])
        var tokens: [String] = []
        for _ in 0..<3 {
            let token = TestTokens.random()
            tokens.append(token)
            #expect(try await sandbox.push(token: token).status == 200)
        }
        let deliveries = try await sandbox.admin("GET", "/deliveries").json?["deliveries"] as? [[String: Any]]
        #expect(deliveries?.compactMap { $0["token"] as? String } == Array(tokens.suffix(2)))
        let stats = try await sandbox.admin("GET", "/stats")
        #expect(number(stats.json?["delivered"]) == 3)
        #expect(number(stats.json?["recorded"]) == 2)
    }

    @Test func adminDeliveriesFiltersAndReset() async throws {
        let sandbox = try await SandboxProcess()
        let other = TestTokens.random()
        #expect(try await sandbox.push().status == 200)
        try await Task.sleep(for: .milliseconds(20))
        let middle = Int64(Date().timeIntervalSince1970 * 1000)
        try await Task.sleep(for: .milliseconds(20))
        #expect(try await sandbox.push(token: other, headers: SandboxProcess.headers(topic: "com.example.app.voip", pushType: "voip")).status == 200)
        #expect(try await sandbox.push(token: other, headers: SandboxProcess.headers(topic: "com.other.app")).status == 200)

        func count(_ query: String) async throws -> Int? {
            (try await sandbox.admin("GET", "/deliveries\(query)").json?["deliveries"] as? [Any])?.count
        }
        #expect(try await count("") == 3)
        #expect(try await count("?token=\(other)") == 2)
        #expect(try await count("?app=com.example.app") == 2)
        #expect(try await count("?app=com.example.app&token=\(other)") == 1)
        #expect(try await count("?since=\(middle)") == 2)
        #expect(try await count("?limit=1") == 1)
        let badSince = try await sandbox.admin("GET", "/deliveries?since=yesterday")
        #expect(badSince.status == 400)
        #expect(badSince.json?["field"] as? String == "since")

        let reset = try await sandbox.admin("DELETE", "/deliveries")
        #expect(number(reset.json?["deleted"]) == 3)
        #expect(try await count("") == 0)
        let stats = try await sandbox.admin("GET", "/stats")
        #expect(number(stats.json?["delivered"]) == 3)
        #expect(number(stats.json?["recorded"]) == 0)
    }

    @Test func sigtermFinishesInFlightStreamsAndExitsZero() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"delay_ms":1500}"#).status == 200)
        async let inFlight = sandbox.push()
        try await Task.sleep(for: .milliseconds(500))
        let status = await sandbox.terminate()
        let answer = try await inFlight
        #expect(answer.status == 200, "\(answer)")
        #expect(status == 0, "\(sandbox.process.output)")
        // Stopped listening.
        let after = try await sandbox.push()
        #expect(after.exitCode == 7, "\(after)")
    }

    @Test func certificateFilesAndClientCertificates() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sandbox-certs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = """
            set -e
            cd '\(directory.path)'
            ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
            openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj '/CN=test CA' 2>/dev/null
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext
            openssl req $ec -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext 2>/dev/null
            openssl req $ec -keyout client.key -out client.csr -subj '/UID=com.example.cert/CN=Apple Push Services: com.example.cert' 2>/dev/null
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 2>/dev/null
            openssl req -x509 $ec -keyout rogue.key -out rogue.pem -days 2 -subj '/UID=com.example.cert/CN=rogue' 2>/dev/null
            """
        let openssl = try ChildProcess(["/bin/bash", "-c", script])
        #expect(await openssl.waitForExit() == 0, "\(openssl.output)")
        let file = { (name: String) in directory.appendingPathComponent(name).path }
        let sandbox = try await SandboxProcess(
            arguments: ["--tls-cert", file("server.pem"), "--tls-key", file("server.key"), "--client-ca", file("ca.pem")],
            caFile: file("ca.pem"),
            directory: directory
        )
        // The configured certificate serves, and a connection without a client certificate needs a JWT.
        #expect(try await sandbox.push().status == 200)
        let noCredentials = try await sandbox.push(headers: [("apns-topic", "com.example.app")])
        #expect(noCredentials.reason == "MissingProviderToken", "\(noCredentials)")

        let certified = try await sandbox.push(
            headers: [("apns-topic", "com.example.cert")], curlArguments: ["--cert", file("client.pem"), "--key", file("client.key")])
        #expect(certified.status == 200, "\(certified)")
        // No apns-topic: the certificate's UID.
        let defaultTopic = try await sandbox.push(headers: [], curlArguments: ["--cert", file("client.pem"), "--key", file("client.key")])
        #expect(defaultTopic.status == 200, "\(defaultTopic)")
        let deliveries = try await sandbox.admin("GET", "/deliveries?app=com.example.cert")
        #expect((deliveries.json?["deliveries"] as? [Any])?.count == 2)

        let rogue = try await sandbox.push(
            headers: [("apns-topic", "com.example.cert")], curlArguments: ["--cert", file("rogue.pem"), "--key", file("rogue.key")])
        #expect(rogue.status == 403, "\(rogue)")
        #expect(rogue.reason == "BadCertificate")
    }

    @Test func generatedCertificateNamesLocalhostAndLoopback() async throws {
        let sandbox = try await SandboxProcess()
        let byName = try await SandboxProcess.curl(
            url: "https://localhost:\(sandbox.port)/3/device/\(SandboxProcess.token)",
            method: "POST",
            headers: SandboxProcess.headers(),
            body: "{}",
            arguments: ["--http2", "--cacert", sandbox.caFile, "--resolve", "localhost:\(sandbox.port):127.0.0.1"],
            directory: sandbox.directory
        )
        #expect(byName.status == 200, "\(byName)")
        // Without the CA the certificate is not trusted.
        let untrusted = try await SandboxProcess.curl(
            url: "https://127.0.0.1:\(sandbox.port)/3/device/\(SandboxProcess.token)",
            method: "POST",
            headers: SandboxProcess.headers(),
            body: "{}",
            arguments: ["--http2"],
            directory: sandbox.directory
        )
        #expect(untrusted.exitCode == 60, "\(untrusted)")
    }

    @Test func startFailuresNameTheProblem() async throws {
        let port = TestServers.freePort()
        let badKey = try ChildProcess([
            SandboxProcess.executable, "--port", String(port), "--admin-port", String(TestServers.freePort()), "--public-key",
            "KEY1234567=-----BEGIN PUBLIC KEY-----x",
        ])
        #expect(await badKey.waitForExit(timeout: .seconds(15)) == 1)
        #expect(badKey.output.contains("KEY1234567"), "\(badKey.output)")
        let missingCert = try ChildProcess([
            SandboxProcess.executable, "--port", String(port), "--admin-port", String(TestServers.freePort()), "--tls-cert", "/nonexistent.pem",
            "--tls-key", "/nonexistent.key",
        ])
        #expect(await missingCert.waitForExit(timeout: .seconds(15)) == 1)
        #expect(missingCert.output.contains("--tls-cert /nonexistent.pem"), "\(missingCert.output)")
    }
}
