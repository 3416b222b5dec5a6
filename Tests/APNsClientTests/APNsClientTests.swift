import APNs
import Crypto
import Foundation
import Synchronization
import TestSupport
import Testing

/// The client against the built apns-sandbox over real TLS and HTTP/2.
@Suite("APNs client against apns-sandbox")
struct APNsClientTests {
    @Test func sendsANotificationWithEveryHeader() async throws {
        let sandbox = try await SandboxProcess()
        let client = try makeClient(sandbox)
        let id = UUID()
        var notification = alert(payload: #"{"aps":{"alert":{"title":"Hi","body":"there"},"badge":3},"order":4711}"#, apnsID: id)
        notification.priority = .conserveEnergy
        notification.expiration = 1_767_225_600
        notification.collapseID = "order-4711"
        let response = try await client.send(notification)
        #expect(response.status == 200)
        #expect(response.apnsID == id.uuidString.lowercased())
        #expect(response.apnsUniqueID != nil)
        #expect(response.outcome == .delivered)
        #expect(client.openConnections == 1)

        let recorded = try await sandbox.admin("GET", "/deliveries?token=\(SandboxProcess.token)")
        let delivery = try #require((recorded.json?["deliveries"] as? [[String: Any]])?.first)
        let headers = try #require(delivery["headers"] as? [String: String])
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-expiration"] == "1767225600")
        #expect(headers["apns-collapse-id"] == "order-4711")
        #expect(delivery["topic"] as? String == "com.example.app")
        #expect((delivery["payload"] as? [String: Any])?["order"] as? Int == 4711)
        await client.shutdown()
        #expect(client.openConnections == 0)
    }

    @Test func theCallbackFormAnswersExactlyOnceWithoutATaskPerNotification() async throws {
        let sandbox = try await SandboxProcess()
        #expect(try await sandbox.admin("PUT", "/tokens/\(SandboxProcess.token)", body: #"{"state":"bad"}"#).status == 200)
        let client = try makeClient(sandbox)
        let tokens = (0..<300).map { _ in TestTokens.random() } + [SandboxProcess.token]
        let ledger = AnswerLedger(requests: tokens.count)
        for (index, token) in tokens.enumerated() {
            client.send(alert(token), completion: ledger.completion(index))
        }
        try await ledger.waitUntilAllAnswered()
        #expect(ledger.count(status: 200) == 300)
        let bad = try #require(ledger.firstAnswers.last ?? nil)
        #expect((try? bad.get())?.reason == .badDeviceToken)
        // Refused before it is queued: answered at once, on the caller's thread.
        let refused = AnswerLedger(requests: 1)
        client.send(alert(payload: ""), completion: refused.completion(0))
        #expect(refused.count(.invalidRequest) == 1)
        await client.shutdown()
        let afterShutdown = AnswerLedger(requests: 1)
        client.send(alert(), completion: afterShutdown.completion(0))
        #expect(afterShutdown.count(.shutdown) == 1)
        // The connection threads have exited: no answer can come any more, so the counts are final.
        for ledger in [ledger, refused, afterShutdown] {
            #expect(ledger.answeredMoreThanOnce.isEmpty, "answered more than once: \(ledger.answeredMoreThanOnce)")
        }
    }

    @Test func classifiesEachKindOfAnswer() async throws {
        let sandbox = try await SandboxProcess()
        let client = try makeClient(sandbox)
        let gone = TestTokens.random()
        let bad = TestTokens.random()
        #expect(try await sandbox.admin("PUT", "/tokens/\(gone)", body: #"{"state":"unregistered","timestamp":1700000000123}"#).status == 200)
        #expect(try await sandbox.admin("PUT", "/tokens/\(bad)", body: #"{"state":"bad"}"#).status == 200)

        let unregistered = try await client.send(alert(gone))
        #expect(unregistered.status == 410)
        #expect(unregistered.reason == .unregistered)
        #expect(unregistered.timestamp == 1_700_000_000_123)
        #expect(unregistered.outcome == .invalidToken(since: 1_700_000_000_123))

        let expiredToken = TestTokens.random()
        #expect(try await sandbox.admin("PUT", "/tokens/\(expiredToken)", body: #"{"state":"expired","timestamp":1700000000456}"#).status == 200)
        let expired = try await client.send(alert(expiredToken))
        #expect(expired.status == 410 && expired.reason == .expiredToken)
        #expect(expired.outcome == .invalidToken(since: 1_700_000_000_456))

        let badToken = try await client.send(alert(bad))
        #expect(badToken.status == 400)
        #expect(badToken.reason == .badDeviceToken)
        #expect(badToken.outcome == .invalidToken(since: nil))

        // A payload APNs cannot parse: the notification itself is wrong.
        let notJSON = try await client.send(alert(payload: "not json"))
        #expect(notJSON.status == 400)
        #expect(notJSON.outcome == .permanentFailure)

        for status in [503, 429, 500] {
            #expect(try await sandbox.admin("PUT", "/faults", body: #"{"status":\#(status),"rate":1}"#).status == 200)
            let refused = try await client.send(alert())
            #expect(refused.status == status)
            #expect(refused.outcome == .retry, "\(status) \(String(describing: refused.reason))")
            #expect(try await sandbox.admin("DELETE", "/faults").status == 200)
        }
        // The reason a fault chooses is the one the client hears.
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"status":503,"rate":1,"reason":"Shutdown"}"#).status == 200)
        let shuttingDown = try await client.send(alert())
        #expect(shuttingDown.status == 503 && shuttingDown.reason == .shutdown && shuttingDown.outcome == .retry)
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)

        // Checked before sending: APNs would refuse it anyway.
        await #expect(throws: APNsClientError.self) {
            try await client.send(APNsNotification(deviceToken: "abc", topic: "com.example.app", payload: Array("{}".utf8)))
        }
        do {
            _ = try await client.send(alert(payload: "{\"aps\":{\"alert\":\"" + String(repeating: "x", count: 4100) + "\"}}"))
            Issue.record("an oversized payload was sent")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("payload"))
        }
        await client.shutdown()
    }

    @Test func aKeyTheServerDoesNotKnowIsACredentialProblem() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--public-key", "ABC123DEFG=\(try writePublicKey(SandboxProcess.signingKey))"])
        let stranger = try APNsSigningKey.ephemeral(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let client = try makeClient(sandbox, credentials: .token(stranger))
        let response = try await client.send(alert())
        #expect(response.status == 403)
        #expect(response.reason == .invalidProviderToken)
        #expect(response.outcome == .credentialProblem)
        await client.shutdown()

        let trusted = try makeClient(sandbox)
        #expect(try await trusted.send(alert()).status == 200)
        await trusted.shutdown()
    }

    /// A key Apple limits to production, used against the development servers: APNs answers 403 with
    /// its own spelling, `BadEnvironmentKeyInToken`, and the client takes it as a credential problem
    /// (push-send pauses the app) rather than a broken notification.
    @Test func aKeyLimitedToTheOtherEnvironmentIsACredentialProblem() async throws {
        let publicKey = "ABC123DEFG=\(try writePublicKey(SandboxProcess.signingKey))"
        let development = try await SandboxProcess(arguments: ["--public-key", publicKey, "--key-environment", "ABC123DEFG=production"])
        let client = try makeClient(development)
        let response = try await client.send(alert())
        #expect(response.status == 403)
        #expect(response.reason?.rawValue == "BadEnvironmentKeyInToken")
        #expect(response.reason?.canonical == .badEnvironmentKeyIdInToken)
        #expect(response.outcome == .credentialProblem)
        await client.shutdown()

        let production = try await SandboxProcess(
            arguments: ["--public-key", publicKey, "--key-environment", "ABC123DEFG=production", "--environment", "production"])
        let live = try makeClient(production)
        #expect(try await live.send(alert()).status == 200)
        await live.shutdown()
    }

    @Test func reusesOneProviderTokenAndRefreshesItAfterFortyMinutes() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--public-key", "ABC123DEFG=\(try writePublicKey(SandboxProcess.signingKey))"])
        // Our clock starts 41 minutes behind: the first token is 41 minutes old for the server (valid).
        let clock = TestClock()
        clock.set(secondsFromNow: -41 * 60)
        let client = try makeClient(sandbox) {
            $0.providerTokenClock = { clock.now }
            $0.connections = 2
        }
        let first = await sendAll(client, (0..<50).map { _ in alert() })
        #expect(first.allSatisfy { (try? $0.get().status) == 200 })
        #expect(client.providerTokensMinted == 1)
        let token = try client.currentAuthorization()

        clock.advance(seconds: 25 * 60)
        #expect(try await client.send(alert()).status == 200)
        #expect(client.providerTokensMinted == 1)
        #expect(try client.currentAuthorization() == token)

        // 41 minutes after the first token: a new one.
        clock.advance(seconds: 16 * 60)
        #expect(try await client.send(alert()).status == 200)
        #expect(client.providerTokensMinted == 2)
        #expect(try client.currentAuthorization() != token)
        await client.shutdown()
    }

    @Test func recoversFromExpiredProviderTokenWithOneRefresh() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--public-key", "ABC123DEFG=\(try writePublicKey(SandboxProcess.signingKey))"])
        // Our clock runs 80 minutes behind the server's: the token is minted 80 minutes "old".
        let clock = TestClock()
        clock.set(secondsFromNow: -80 * 60)
        let client = try makeClient(sandbox) { $0.providerTokenClock = { clock.now } }
        _ = try client.currentAuthorization()
        #expect(client.providerTokensMinted == 1)
        // 30 minutes later by our clock the token is still reused — but the server calls it expired;
        // the client mints a new one (iat 50 minutes ago for the server: valid) and resends.
        clock.advance(seconds: 30 * 60)
        let response = try await client.send(alert())
        #expect(response.status == 200)
        #expect(client.providerTokensMinted == 2)
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect((stats["by_reason"] as? [String: Any])?["ExpiredProviderToken"] as? Int == 1)

        // A token the server keeps calling expired is not refreshed in a loop: the answer comes back.
        let stuck = TestClock()
        stuck.set(secondsFromNow: -3 * 3600)
        let stuckClient = try makeClient(sandbox) { $0.providerTokenClock = { stuck.now } }
        let refused = try await stuckClient.send(alert())
        #expect(refused.status == 403)
        #expect(refused.reason == .expiredProviderToken)
        #expect(refused.outcome == .credentialProblem)
        #expect(stuckClient.providerTokensMinted == 1)
        await stuckClient.shutdown()
        await client.shutdown()
    }

    @Test func theProviderTokenVerifiesWithOpenSSL() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sandbox = try await SandboxProcess()
        let client = try makeClient(sandbox)
        let authorization = try #require(try client.currentAuthorization())
        #expect(authorization.hasPrefix("bearer "))
        let parts = authorization.dropFirst("bearer ".count).split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = try #require(try JSONSerialization.jsonObject(with: base64URLDecode(parts[0])) as? [String: Any])
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "ABC123DEFG")
        let claims = try #require(try JSONSerialization.jsonObject(with: base64URLDecode(parts[1])) as? [String: Any])
        #expect(claims["iss"] as? String == "DEF123GHIJ")
        let issuedAt = try #require(claims["iat"] as? Int)
        #expect(abs(issuedAt - Int(Date().timeIntervalSince1970)) < 60)

        let input = directory.appendingPathComponent("input")
        let signature = directory.appendingPathComponent("signature.der")
        let publicKey = directory.appendingPathComponent("public.pem")
        try Data("\(parts[0]).\(parts[1])".utf8).write(to: input)
        try Data(derSignature(rawSignature: Array(base64URLDecode(parts[2])))).write(to: signature)
        try Data(SandboxProcess.signingKey.publicKeyPEM.utf8).write(to: publicKey)
        let verified = try await run(["/usr/bin/openssl", "dgst", "-sha256", "-verify", publicKey.path, "-signature", signature.path, input.path])
        #expect(verified.status == 0, "\(verified.output)")
        #expect(verified.output.contains("Verified OK"))

        // A changed claim fails the same check: the test really checks something.
        try Data("\(parts[0]).\(base64URLEncode(Array(#"{"iss":"DEF123GHIJ","iat":1}"#.utf8)))".utf8).write(to: input)
        let tampered = try await run(["/usr/bin/openssl", "dgst", "-sha256", "-verify", publicKey.path, "-signature", signature.path, input.path])
        #expect(tampered.status != 0)
        await client.shutdown()
    }
}

/// Writes `key`'s public key to a temporary PEM file and returns its path.
func writePublicKey(_ key: APNsSigningKey) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("apns-public-\(UUID().uuidString).pem").path
    try Data(key.publicKeyPEM.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

func base64URLDecode(_ text: String) throws -> Data {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let data = Data(base64Encoded: base64) else { throw ChildProcessError("not base64url: \(text)") }
    return data
}

func base64URLEncode(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// An ES256 signature (r ‖ s, 32 bytes each) as the DER `ECDSA-Sig-Value` OpenSSL verifies, built
/// here by hand so the check does not reuse the code that signed.
func derSignature(rawSignature raw: [UInt8]) -> [UInt8] {
    func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var value = Array(bytes.drop(while: { $0 == 0 }))
        if value.isEmpty { value = [0] }
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02, UInt8(value.count)] + value
    }
    let body = integer(raw[0..<32]) + integer(raw[32..<64])
    return [0x30, UInt8(body.count)] + body
}
