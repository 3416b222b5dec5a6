import APNs
import Foundation
import PushCore
import PushServiceKit
import Testing

@testable import PushSend

/// Send batch bodies, settings and pause bookkeeping, without servers.
@Suite struct SendBatchDecodingTests {
    static let token = String(repeating: "ab", count: 32)

    static func body(_ overrides: [String: String] = [:], without: Set<String> = []) -> [UInt8] {
        var fields: [String: String] = [
            "v": "1", "request_id": #""r1""#, "batch_id": #""r1/0""#, "app": #""com.example.app""#, "environment": #""sandbox""#,
            "push_type": #""voip""#, "priority": "10", "expiration": "1767225600", "collapse_id": #""c1""#,
            "payload": #""{\"aps\":{}}""#, "tokens": #"["\#(token)"]"#, "attempt": "0", "created_at": "1767225000123",
        ]
        for (key, value) in overrides { fields[key] = value }
        for key in without { fields[key] = nil }
        return Array(("{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "}").utf8)
    }

    @Test func aGoodBatchBecomesNotificationsWithTheTopicSuffix() throws {
        let decoded = try DecodedSendBatch(body: Self.body())
        #expect(decoded.batch.environment == .sandbox)
        let notification = decoded.notification(token: Self.token)
        #expect(notification.topic == "com.example.app.voip")
        #expect(notification.pushType == .voip && notification.priority == .immediate)
        #expect(notification.expiration == 1_767_225_600 && notification.collapseID == "c1")
        #expect(String(decoding: notification.payload, as: UTF8.self) == #"{"aps":{}}"#)
        #expect(throws: Never.self) { try notification.validate() }
    }

    @Test func collapseIDsComeFromTheRequestUnlessTheBatchNamesOne() throws {
        let decoded = try DecodedSendBatch(body: Self.body(without: ["collapse_id"]))
        #expect(decoded.notification(token: Self.token).collapseID == nil)
        #expect(decoded.notification(token: Self.token, collapseID: "r1").collapseID == "r1")
        #expect(CollapseID.derived(fromRequestID: "order-4711-shipped") == "order-4711-shipped")
        let long = String(repeating: "é", count: 40) + "-x"
        let derived = CollapseID.derived(fromRequestID: long)
        #expect(derived.utf8.count <= 64 && derived.hasPrefix(String(repeating: "é", count: 23) + "~"), "\(derived)")
        #expect(derived != CollapseID.derived(fromRequestID: String(repeating: "é", count: 40) + "-y"), "long ids stay apart")
        #expect(CollapseID.derived(fromRequestID: long) == derived, "stable")
        let exactly64 = String(repeating: "a", count: 64)
        #expect(CollapseID.derived(fromRequestID: exactly64) == exactly64)
        #expect(CollapseID.derived(fromRequestID: exactly64 + "b").utf8.count == 64)
    }

    @Test func markSlotsDefaultToTheTokensPlacesAndRetriesKeepTheirs() throws {
        let fresh = try DecodedSendBatch(body: Self.body(["tokens": #"["\#(Self.token)", "\#(String(repeating: "cd", count: 32))"]"#])).batch
        let markSet = fresh.effectiveMarkSet
        #expect(markSet == "r1/0#" + SendBatch.fingerprint(fresh.tokens) && markSet.utf8.count == 5 + 16 && fresh.slot(at: 1) == 1)
        let retry = fresh.narrowed(to: [String(repeating: "cd", count: 32)], attempt: 1, deferrals: 0)
        #expect(retry.batchID == "r1/0#a1d0" && retry.markSet == markSet && retry.slots == [1])
        let again = try DecodedSendBatch(body: SendJSON.encode(retry)).batch
        #expect(again.effectiveMarkSet == markSet && again.slot(at: 0) == 1, "the slots survive the trip through the queue")
        let retryOfRetry = again.narrowed(to: again.tokens, attempt: 2, deferrals: 0)
        #expect(retryOfRetry.markSet == markSet && retryOfRetry.slots == [1])
        // The same batch id with other tokens (push-render resumed from an older cursor) is another mark set.
        var other = fresh
        other.tokens.reverse()
        #expect(other.effectiveMarkSet != markSet)
    }

    @Test func badBatchesNameTheField() {
        let cases: [([UInt8], String)] = [
            (Array("nope".utf8), "not valid JSON"),
            (Self.body(without: ["tokens"]), "tokens: is required"),
            (Self.body(["tokens": "[]"]), "tokens: must hold at least one token"),
            (Self.body(["tokens": #"["\#(Self.token)", "XYZ"]"#]), "tokens[1]: must be 64–200 lowercase hex characters, even length"),
            (Self.body(["priority": "7"]), "priority: must be 10, 5 or 1, got 7"),
            // The push requests' rule per push type: APNs answers BadPriority.
            (Self.body(["push_type": #""background""#, "priority": "10"]), "priority: must be 5 for background pushes, got 10"),
            (Self.body(["push_type": #""liveactivity""#, "priority": "1"]), "priority: must be 10 or 5 for liveactivity pushes, got 1"),
            (Self.body(["push_type": #""shout""#]), #"push_type: is not an APNs push type: "shout""#),
            (Self.body(["v": "2"]), "v: must be 1, got 2"),
            (Self.body(["payload": #""""#]), "payload: must not be empty"),
            (Self.body(["attempt": #""x""#]), "attempt: has the wrong type"),
            (Self.body(["attempt": "-1"]), "attempt: must be 0–1000000, got -1"),
            (Self.body(["attempt": "9223372036854775807"]), "attempt: must be 0–1000000, got 9223372036854775807"),
            (Self.body(["environment": #""staging""#]), "environment: "),
            (Self.body(["collapse_id": "\"\(String(repeating: "c", count: 65))\""]), "collapse_id: must be at most 64 bytes, got 65"),
            (Self.body(["slots": "[1, 2]"]), "slots: must hold one slot per token (1), got 2"),
            (Self.body(["slots": "[65536]"]), "slots[0]: must be 0–65535, got 65536"),
            (Self.body(["slots": "[-1]"]), "slots[0]: must be 0–65535, got -1"),
            (Self.body(["slots": "[9223372036854775807]"]), "slots[0]: must be 0–65535"),
            (Self.body(["mark_set": #""""#]), "mark_set: must be 1–512 bytes, got 0"),
            // Hostile-input catalogue (tests/system/test_hostile.py): numbers JSONDecoder cannot hold are named,
            // and what would fail at APNs on every try is refused once.
            (Self.body(["priority": "1e400"]), "priority: must be a whole number of at most 64 bits, got 1e400"),
            (Self.body(["v": "1.5"]), "v: must be a whole number of at most 64 bits, got 1.5"),
            (Self.body(["expiration": "9223372036854775808"]), "expiration: must be a whole number of at most 64 bits, got 9223372036854775808"),
            (Self.body(["created_at": "18446744073709551616"]), "created_at: must be a whole number of at most 64 bits"),
            (Self.body(["attempt": "1" + String(repeating: "0", count: 400)]), "attempt: must be a whole number of at most 64 bits, got 1000"),
            (Self.body(["slots": "[18446744073709551616]"]), "slots[0]: must be a whole number of at most 64 bits"),
            (Self.body(["expiration": "9999999999999999"]), "expiration: must be 0 or seconds since 1970 up to 253402300799 (9999-12-31)"),
            (Self.body(["collapse_id": #""a\r\nx-evil: 1""#]), "collapse_id: must not contain control characters"),
            (Self.body(["collapse_id": #""a\u0000b""#]), "collapse_id: must not contain control characters"),
            (Self.body(["request_id": #""r\n1""#]), "request_id: must not contain control characters"),
            (Self.body(["push_type": #""mdm""#]), "push_type: mdm pushes are not sent by push-send"),
        ]
        for (body, expected) in cases {
            do {
                _ = try DecodedSendBatch(body: body)
                Issue.record("accepted: \(String(decoding: body, as: UTF8.self))")
            } catch {
                #expect(error.message.hasPrefix(expected), "\(error.message)")
            }
        }
    }

    @Test func settingsAreReadAndBadValuesNamed() async throws {
        let reader = try await PushConfigurationReader.load(environment: [
            "PUSH_SEND_PREFETCH": "8", "PUSH_SEND_MAX_ATTEMPTS": "3", "PUSH_SEND_CONNECTIONS": "4",
            "PUSH_SEND_DRAIN_TIMEOUT_S": "2.5", "PUSH_SEND_RATE_LIMITS": "false", "PUSH_SEND_QUEUE_PREFIX": "bench.q",
        ])
        let send = try SendConfiguration(reader: reader)
        #expect(send.prefetch == 8 && send.maxAttempts == 3 && send.connections == 4)
        #expect(send.drainTimeout == .milliseconds(2500))
        #expect(!send.rateLimitsEnabled && send.queuePrefix == "bench.q")
        #expect(send.maxDeferrals == 100 && send.dedupeTTL == .seconds(86_400), "defaults")

        let bad = try await PushConfigurationReader.load(environment: ["PUSH_SEND_PREFETCH": "0"])
        #expect {
            try SendConfiguration(reader: bad)
        } throws: { error in
            "\(error)".contains("PUSH_SEND_PREFETCH")
        }
        let badPrefix = try await PushConfigurationReader.load(environment: ["PUSH_SEND_QUEUE_PREFIX": "a b"])
        #expect(throws: ConfigurationError.self) { try SendConfiguration(reader: badPrefix) }
    }

    @Test func appCredentialsAndEndpointsMapToTheClientsTypes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("send-creds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("AuthKey.p8").path
        try SendTestKeys.p8.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let app = AppConfiguration(bundleID: "com.example.app", apns: .token(.init(keyFile: keyFile, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))
        let configuration = try APNsClientConfiguration.forApp(
            app,
            environment: .sandbox,
            endpointOverride: nil,
            caFile: "/tmp/ca.pem",
            send: SendConfiguration(connections: 3, requestTimeout: .seconds(7))
        )
        #expect(configuration.endpoint == .development, "sandbox devices go to Apple's development servers")
        #expect(configuration.connections == 3 && configuration.requestTimeout == .seconds(7))
        #expect(configuration.caFile == nil, "an extra CA is never trusted for Apple's servers")
        let overridden = try APNsClientConfiguration.forApp(
            app, environment: .sandbox, endpointOverride: URL(string: "https://127.0.0.1:2197"), caFile: "/tmp/ca.pem", send: SendConfiguration())
        #expect(overridden.caFile == "/tmp/ca.pem", "trusted for the overriding endpoint only")
        let production = AppConfiguration(bundleID: "com.example.live", environment: .production, apns: app.apns)
        let development = AppConfiguration(bundleID: "com.example.app", environment: .sandbox, apns: app.apns)
        let apps = try AppsFile(apps: [development, production])
        #expect(
            apnsEndpointWarnings(apps: apps, endpointOverride: URL(string: "https://127.0.0.1:2197"), caFile: nil)
                == [
                    "PUSH_APNS_ENDPOINT https://127.0.0.1:2197 replaces Apple's servers for production apps too (com.example.live): their pushes do not reach devices"
                ])
        #expect(apnsEndpointWarnings(apps: apps, endpointOverride: nil, caFile: "/tmp/ca.pem").first?.contains("is not used") == true)
        #expect(
            apnsEndpointWarnings(apps: try AppsFile(apps: [development]), endpointOverride: URL(string: "https://127.0.0.1:2197"), caFile: "/x")
                .isEmpty)
        guard case .token(let key) = configuration.credentials else {
            Issue.record("token auth expected")
            return
        }
        #expect(key.keyID == "ABC123DEFG" && key.teamID == "DEF123GHIJ")
        #expect(try APNsEndpoint.forEnvironment(.production, override: nil) == .production)
        #expect(
            try APNsEndpoint.forEnvironment(.production, override: URL(string: "https://127.0.0.1:2197"))
                == APNsEndpoint(host: "127.0.0.1", port: 2197))

        let missing = AppConfiguration(
            bundleID: "com.example.app",
            apns: .token(.init(keyFile: directory.appendingPathComponent("none.p8").path, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))
        #expect(throws: APNsCredentialError.self) {
            try APNsClientConfiguration.forApp(missing, environment: .production, endpointOverride: nil, caFile: nil, send: SendConfiguration())
        }
        guard case .certificate(let certificate) = try APNsCredentials(.pem(certificateFile: "c.pem", privateKeyFile: "k.pem")) else {
            Issue.record("certificate auth expected")
            return
        }
        #expect(certificate.source == .pem(certificateFile: "c.pem", privateKeyFile: "k.pem"))
        guard case .certificate(let bundle) = try APNsCredentials(.pkcs12(certificateFile: "c.p12", password: "pw")) else {
            Issue.record("certificate auth expected")
            return
        }
        #expect(bundle.source == .pkcs12(file: "c.p12", password: "pw"))
    }

    @Test func pausesExtendAndExpire() {
        let pauses = AppPauses()
        #expect(pauses.remaining("a", now: 0) == nil)
        #expect(pauses.pause("a", for: .seconds(10), now: 1_000), "a new pause")
        #expect(!pauses.pause("a", for: .seconds(2), now: 2_000), "already paused; never shortened")
        #expect(pauses.remaining("a", now: 6_000) == .seconds(5))
        #expect(pauses.pausedApps(now: 6_000) == ["a"])
        #expect(pauses.remaining("b", now: 6_000) == nil)
        #expect(pauses.remaining("a", now: 11_000) == nil)
        #expect(pauses.pausedApps(now: 11_000).isEmpty)
    }
}
