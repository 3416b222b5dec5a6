import APNs
import Foundation
import TestSupport
import Testing

/// A channel client for `sandbox`'s management API (served on its one port), trusting its CA.
func makeChannelClient(_ sandbox: SandboxProcess, credentials: APNsCredentials = .token(SandboxProcess.signingKey)) throws -> APNsChannelClient {
    var configuration = APNsClientConfiguration(
        endpoint: try APNsEndpoint(url: sandbox.endpointURL), credentials: credentials, caFile: sandbox.caFile)
    configuration.requestTimeout = .seconds(20)
    configuration.connections = 1
    return try APNsChannelClient(configuration: configuration, logger: TestLogger.make("apns-channel-test"))
}

/// The channel-management client and broadcasts against the built apns-sandbox over real TLS and
/// HTTP/2.
@Suite("APNs broadcast channels against apns-sandbox")
struct APNsChannelClientTests {
    static let app = "com.example.app"
    static let payload = Array(#"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"score":"2-1"}}}"#.utf8)

    /// What the admin API recorded on `channel`.
    func broadcasts(_ sandbox: SandboxProcess, on channel: String) async throws -> [[String: Any]] {
        let escaped = channel.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        return try #require(try await sandbox.admin("GET", "/deliveries?channel=\(escaped)").json?["deliveries"] as? [[String: Any]])
    }

    /// The error `body` throws; fails the test when it throws none.
    func channelError<T>(_ body: () async throws(APNsChannelError) -> T) async -> APNsChannelError? {
        do {
            _ = try await body()
            Issue.record("expected an APNsChannelError")
            return nil
        } catch {
            return error
        }
    }

    @Test func createReadListDelete() async throws {
        let sandbox = try await SandboxProcess()
        let channels = try makeChannelClient(sandbox)
        let quiet = try await channels.create(bundleID: Self.app, storagePolicy: .noMessageStored)
        let stored = try await channels.create(bundleID: Self.app, storagePolicy: .mostRecentMessageStored, requestID: UUID())
        #expect(APNsBroadcast.isWellFormedChannelID(quiet) && APNsBroadcast.isWellFormedChannelID(stored))
        #expect(quiet != stored)

        #expect(try await channels.read(channelID: quiet, bundleID: Self.app) == APNsChannelConfiguration(storagePolicy: .noMessageStored))
        let read = try await channels.read(channelID: stored, bundleID: Self.app)
        #expect(read.storagePolicy == .mostRecentMessageStored)
        #expect(read.pushType == "LiveActivity")
        #expect(try await channels.list(bundleID: Self.app) == [quiet, stored])
        #expect(try await channels.list(bundleID: "com.example.other") == [])

        try await channels.delete(channelID: quiet, bundleID: Self.app)
        #expect(try await channels.list(bundleID: Self.app) == [stored])

        // A deleted channel: APNs' reason, named in the error.
        let requestID = UUID()
        let gone = try #require(
            await channelError { () async throws(APNsChannelError) in
                try await channels.read(channelID: quiet, bundleID: Self.app, requestID: requestID)
            })
        #expect(gone.status == 400)
        #expect(gone.reason == .channelNotRegistered)
        #expect(gone.requestID == requestID.uuidString.lowercased())
        #expect(!gone.isRetryable)
        #expect(gone.description.hasPrefix("ChannelNotRegistered (400): no channel '\(quiet)' for com.example.app"), "\(gone)")
        let deletedTwice = try #require(
            await channelError { () async throws(APNsChannelError) in try await channels.delete(channelID: quiet, bundleID: Self.app) })
        #expect(deletedTwice.reason == .channelNotRegistered)
        await channels.shutdown()
    }

    @Test func requestsAPNsWouldRefuseAreNotSent() async throws {
        let sandbox = try await SandboxProcess()
        let channels = try makeChannelClient(sandbox)
        let cases: [(String, () async throws(APNsChannelError) -> Void)] = [
            ("bundle_id", { () async throws(APNsChannelError) in _ = try await channels.list(bundleID: "com.example.app.push-type.liveactivity") }),
            ("bundle_id", { () async throws(APNsChannelError) in _ = try await channels.list(bundleID: "com.example.app/x") }),
            ("apns-channel-id", { () async throws(APNsChannelError) in _ = try await channels.read(channelID: "not base64", bundleID: Self.app) }),
            ("apns-channel-id", { () async throws(APNsChannelError) in try await channels.delete(channelID: "", bundleID: Self.app) }),
            (
                "message-storage-policy",
                { () async throws(APNsChannelError) in
                    _ = try await channels.create(bundleID: Self.app, storagePolicy: APNsChannelStoragePolicy(rawValue: 2))
                }
            ),
        ]
        for (field, body) in cases {
            let error = try #require(await channelError(body))
            #expect(error.clientError?.code == .invalidRequest, "\(error)")
            #expect(error.status == nil)
            #expect(error.description.contains(field), "\(error)")
        }
        // Nothing reached the sandbox.
        #expect(try await sandbox.admin("GET", "/stats").json?["channel_requests"] == nil)
        await channels.shutdown()
    }

    @Test func refusalsByAPNsAreMappedToTheirReasons() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--channel-limit", "1"])
        let channels = try makeChannelClient(sandbox)
        _ = try await channels.create(bundleID: Self.app, storagePolicy: .noMessageStored)
        let full = try #require(
            await channelError { () async throws(APNsChannelError) in try await channels.create(bundleID: Self.app, storagePolicy: .noMessageStored) }
        )
        #expect(full.reason == .cannotCreateChannelConfig)
        #expect(full.description.contains("channel limit"), "\(full)")
        let unknown = Data(repeating: 1, count: 16).base64EncodedString()
        let notRegistered = try #require(
            await channelError { () async throws(APNsChannelError) in try await channels.delete(channelID: unknown, bundleID: Self.app) })
        #expect(notRegistered.reason == .channelNotRegistered)
        await channels.shutdown()

        // A client whose provider token the sandbox cannot verify: 403, a credential problem.
        let strict = try await SandboxProcess(arguments: [
            "--public-key", "ABC123DEFG=\(try writePublicKey(try APNsSigningKey.ephemeral(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))",
        ])
        let wrongKey = try makeChannelClient(strict)
        let forbidden = try #require(await channelError { () async throws(APNsChannelError) in try await wrongKey.list(bundleID: Self.app) })
        #expect(forbidden.status == 403)
        #expect(forbidden.reason == .invalidProviderToken)
        await wrongKey.shutdown()

        // No server: no answer, retryable.
        var configuration = APNsClientConfiguration(
            endpoint: APNsEndpoint(host: "127.0.0.1", port: TestServers.freePort()), credentials: .token(SandboxProcess.signingKey))
        configuration.requestTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        let nobody = try APNsChannelClient(configuration: configuration, logger: TestLogger.make("apns-channel-test"))
        let unanswered = try #require(await channelError { () async throws(APNsChannelError) in try await nobody.list(bundleID: Self.app) })
        #expect(unanswered.status == nil)
        #expect(unanswered.clientError?.code == .connectFailed, "\(unanswered)")
        #expect(unanswered.isRetryable)
        await nobody.shutdown()
    }

    @Test func aLongChannelListArrivesWhole() async throws {
        // 3,000 ids are about 81 KB of JSON: more than an answer to a notification may hold.
        let sandbox = try await SandboxProcess()
        let channels = try makeChannelClient(sandbox)
        let created = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<3000 {
                group.addTask { try await channels.create(bundleID: Self.app, storagePolicy: .noMessageStored) }
            }
            var ids: Set<String> = []
            for try await id in group { ids.insert(id) }
            return ids
        }
        #expect(created.count == 3000)
        let listed = try await channels.list(bundleID: Self.app)
        #expect(listed.count == 3000)
        #expect(Set(listed) == created)
        await channels.shutdown()
    }

    @Test func aBroadcastIsSentOnceAndRecordedWithItsChannel() async throws {
        let sandbox = try await SandboxProcess()
        let channels = try makeChannelClient(sandbox)
        let channel = try await channels.create(bundleID: Self.app, storagePolicy: .mostRecentMessageStored)
        let client = try makeClient(sandbox)
        let requestID = UUID()
        let expiration = Int64(Date().timeIntervalSince1970) + 3600
        let response = try await client.send(
            APNsBroadcast(
                bundleID: Self.app, channelID: channel, priority: .conserveEnergy, expiration: expiration, requestID: requestID,
                storagePolicy: .mostRecentMessageStored, payload: Self.payload))
        #expect(response.status == 200)
        #expect(response.requestID == requestID.uuidString.lowercased())
        #expect(response.outcome == .delivered)
        #expect(response.reason == nil)

        let recorded = try await broadcasts(sandbox, on: channel)
        #expect(recorded.count == 1)
        let delivery = try #require(recorded.first)
        #expect(delivery["channel"] as? String == channel)
        #expect(delivery["topic"] as? String == Self.app)
        let headers = try #require(delivery["headers"] as? [String: String])
        #expect(headers["apns-channel-id"] == channel)
        #expect(headers["apns-push-type"] == "liveactivity")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-expiration"] == String(expiration))
        #expect(headers["apns-request-id"] == requestID.uuidString.lowercased())
        #expect(headers["apns-topic"] == nil)
        #expect((delivery["payload"] as? [String: Any])?["aps"] != nil)

        // Without a request id APNs makes one up; the default priority and expiration are 10 and 0.
        let plain = try await client.send(APNsBroadcast(bundleID: Self.app, channelID: channel, payload: Self.payload))
        #expect(plain.status == 200)
        #expect(UUID(uuidString: plain.requestID ?? "") != nil)
        let second = try #require(try await broadcasts(sandbox, on: channel).last?["headers"] as? [String: String])
        #expect(second["apns-priority"] == "10")
        #expect(second["apns-expiration"] == "0")
        #expect(second["apns-request-id"] == nil)
        await client.shutdown()
        await channels.shutdown()
    }

    @Test func broadcastRefusalsCarryAPNsReasonAndOutcome() async throws {
        let sandbox = try await SandboxProcess()
        let channels = try makeChannelClient(sandbox)
        let quiet = try await channels.create(bundleID: Self.app, storagePolicy: .noMessageStored)
        let client = try makeClient(sandbox)

        // The channel does not exist: stop sending on it.
        let unknown = Data(repeating: 9, count: 16).base64EncodedString()
        let notRegistered = try await client.send(APNsBroadcast(bundleID: Self.app, channelID: unknown, payload: Self.payload))
        #expect(notRegistered.status == 400)
        #expect(notRegistered.reason == .channelNotRegistered)
        #expect(notRegistered.outcome == .channelNotRegistered)
        #expect(notRegistered.requestID != nil)

        // A nonzero expiration on a No Message Stored channel, the policy unknown to the client: APNs refuses it.
        let expiring = try await client.send(APNsBroadcast(bundleID: Self.app, channelID: quiet, expiration: 1_767_225_600, payload: Self.payload))
        #expect(expiring.status == 400)
        #expect(expiring.reason == .badExpirationDate)
        #expect(expiring.outcome == .permanentFailure)
        #expect(!expiring.outcome.isRetryable)

        // Injected unavailability: retry.
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"status":503,"rate":1}"#).status == 200)
        let unavailable = try await client.send(APNsBroadcast(bundleID: Self.app, channelID: quiet, payload: Self.payload))
        #expect(unavailable.status == 503)
        #expect(unavailable.outcome == .retry)
        #expect(unavailable.outcome.isRetryable)
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)

        // Checked before sending, with the field and the reason APNs would give.
        let refusedLocally: [(APNsBroadcast, String)] = [
            (
                APNsBroadcast(
                    bundleID: Self.app, channelID: quiet, expiration: 1_767_225_600, storagePolicy: .noMessageStored, payload: Self.payload),
                "apns-expiration"
            ),
            (APNsBroadcast(bundleID: Self.app, channelID: quiet, expiration: -1, payload: Self.payload), "apns-expiration"),
            (APNsBroadcast(bundleID: Self.app, channelID: "", payload: Self.payload), "MissingChannelId"),
            (APNsBroadcast(bundleID: Self.app, channelID: "abc", payload: Self.payload), "BadChannelId"),
            (APNsBroadcast(bundleID: "com.example.app.push-type.liveactivity", channelID: quiet, payload: Self.payload), "TopicDisallowed"),
            (APNsBroadcast(bundleID: Self.app, channelID: quiet, payload: []), "PayloadEmpty"),
            (APNsBroadcast(bundleID: Self.app, channelID: quiet, payload: Array(repeating: 32, count: 5121)), "PayloadTooLarge"),
        ]
        for (broadcast, named) in refusedLocally {
            do {
                let response = try await client.send(broadcast)
                Issue.record("sent: \(response)")
            } catch {
                #expect(error.code == .invalidRequest)
                #expect(error.message.contains(named), "\(error)")
            }
        }
        // Only the three above reached the sandbox.
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["requests"]) == 3)
        #expect(number(stats["delivered"]) == 0)
        await client.shutdown()
        await channels.shutdown()
    }
}

/// apns-sandbox with `--management-port`: channel management on its own port, as at Apple, and each
/// API refused with 404 `BadPath` on the other's port.
@Suite("APNs channel management on its own port")
struct APNsManagementPortTests {
    @Test func eachAPIAnswersOnlyOnItsOwnPort() async throws {
        let managementPort = TestServers.freePort()
        let sandbox = try await SandboxProcess(arguments: ["--management-port", String(managementPort)])
        var configuration = APNsClientConfiguration(
            endpoint: try APNsEndpoint(url: "https://127.0.0.1:\(managementPort)"), credentials: .token(SandboxProcess.signingKey),
            caFile: sandbox.caFile)
        configuration.connections = 1
        let management = try APNsChannelClient(configuration: configuration, logger: TestLogger.make("apns-management-port"))
        let channel = try await management.create(bundleID: APNsChannelClientTests.app, storagePolicy: .noMessageStored)

        // Management sent to the push port: what a client gets from Apple's push host.
        let misdirected = try makeChannelClient(sandbox)
        do {
            _ = try await misdirected.list(bundleID: APNsChannelClientTests.app)
            Issue.record("the push port answered channel management")
        } catch {
            #expect(error.status == 404 && error.reason == .badPath, "\(error)")
            #expect(error.description.contains("management"), "\(error)")
        }

        // Broadcasts and notifications go to the push port, and only there.
        let push = try makeClient(sandbox)
        let broadcast = APNsBroadcast(bundleID: APNsChannelClientTests.app, channelID: channel, payload: APNsChannelClientTests.payload)
        #expect(try await push.send(broadcast).status == 200)
        #expect(try await push.send(alert()).status == 200)
        var onManagement = configuration
        onManagement.connections = 1
        let wrongHost = try APNsClient(configuration: onManagement, logger: TestLogger.make("apns-management-port"))
        let notification = try await wrongHost.send(alert())
        #expect(notification.status == 404 && notification.reason == .badPath)
        let wrongBroadcast = try await wrongHost.send(broadcast)
        #expect(wrongBroadcast.status == 404)
        for client in [management, misdirected] { await client.shutdown() }
        for client in [push, wrongHost] { await client.shutdown() }
    }
}
