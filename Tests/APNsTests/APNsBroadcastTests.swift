import APNs
import Foundation
import Testing

/// Broadcasts and channel values without I/O: the checks made before sending, what an answer
/// means, the rules shared with apns-sandbox.
@Suite struct APNsBroadcastTests {
    static let channel = "dHN0LXNyY2gtY2hubA=="

    func broadcast(_ change: (inout APNsBroadcast) -> Void = { _ in }) -> APNsBroadcast {
        var broadcast = APNsBroadcast(bundleID: "com.example.game", channelID: Self.channel, payload: Array(#"{"aps":{"event":"update"}}"#.utf8))
        change(&broadcast)
        return broadcast
    }

    @Test func theDefaultsAreApplesAndValid() throws {
        let plain = broadcast()
        #expect(plain.priority == .immediate)
        #expect(plain.expiration == 0)
        #expect(plain.requestID == nil)
        try plain.validate()
        try broadcast {
            $0.priority = .conserveEnergy
            $0.expiration = 1_767_225_600
            $0.storagePolicy = .mostRecentMessageStored
        }.validate()
        try broadcast { $0.storagePolicy = .noMessageStored }.validate()
        // Apple's broadcast page names high, medium and low priorities.
        for priority in APNsPriority.allCases { try broadcast { $0.priority = priority }.validate() }
        try broadcast { $0.payload = Array(repeating: 32, count: APNsBroadcast.maximumPayloadSize) }.validate()
        #expect(APNsBroadcast.maximumPayloadSize == 5120)
    }

    @Test func whatAPNsWouldRefuseIsRefusedWithTheFieldAndReason() {
        let cases: [(APNsBroadcast, String, String)] = [
            (broadcast { $0.expiration = -5 }, "apns-expiration", "BadExpirationDate"),
            (
                broadcast {
                    $0.expiration = 1_767_225_600
                    $0.storagePolicy = .noMessageStored
                }, "apns-expiration", "No Message Stored"
            ),
            (broadcast { $0.channelID = "" }, "apns-channel-id", "MissingChannelId"),
            (broadcast { $0.channelID = "dHN0LXNyY2gtY2hubA" }, "apns-channel-id", "BadChannelId"),
            (broadcast { $0.channelID = "dHN0 LXNyY2gtY2hubA=" }, "apns-channel-id", "BadChannelId"),
            (broadcast { $0.bundleID = "com.example.game.push-type.liveactivity" }, "bundle_id", "TopicDisallowed"),
            (broadcast { $0.bundleID = "com.example.game.voip" }, "bundle_id", "TopicDisallowed"),
            (broadcast { $0.bundleID = "com.example/game" }, "bundle_id", "letters, digits"),
            (broadcast { $0.bundleID = "" }, "bundle_id", "letters, digits"),
            (broadcast { $0.payload = [] }, "payload", "PayloadEmpty"),
            (broadcast { $0.payload = Array(repeating: 32, count: 5121) }, "payload", "PayloadTooLarge"),
        ]
        for (broadcast, field, words) in cases {
            do {
                try broadcast.validate()
                Issue.record("accepted: \(broadcast)")
            } catch {
                #expect(error.field == field, "\(error)")
                #expect(error.description.contains(words), "\(error)")
            }
        }
    }

    @Test func channelIDsAreBase64OfAnyLength() {
        for good in ["dHN0LXNyY2gtY2hubA==", "AAAA", "ab+/cd==", "abc=", String(repeating: "A", count: 400)] {
            #expect(APNsBroadcast.isWellFormedChannelID(good), "\(good)")
        }
        for bad in ["", "abc", "ab=c", "a===", "ab-_cd==", "abcd\n", "=AAA"] {
            #expect(!APNsBroadcast.isWellFormedChannelID(bad), "\(bad)")
        }
    }

    @Test func answersBecomeOutcomes() {
        let cases: [(Int, APNsReason?, APNsBroadcastOutcome)] = [
            (200, nil, .delivered),
            (400, .channelNotRegistered, .channelNotRegistered),
            (400, .badChannelId, .channelNotRegistered),
            (400, .missingChannelId, .channelNotRegistered),
            (400, .badExpirationDate, .permanentFailure),
            (400, .badPriority, .permanentFailure),
            (400, .invalidPushType, .permanentFailure),
            (413, .payloadTooLarge, .permanentFailure),
            (400, .featureNotEnabled, .credentialProblem),
            // How APNs spells it in answers: the same outcome.
            (400, .broadcastFeatureNotEnabled, .credentialProblem),
            (403, .topicMismatch, .credentialProblem),
            (403, .expiredProviderToken, .credentialProblem),
            (429, .tooManyRequests, .retry),
            (500, .internalServerError, .retry),
            (503, .serviceUnavailable, .retry),
            (503, nil, .retry),
        ]
        for (status, reason, outcome) in cases {
            #expect(APNsBroadcastResponse(status: status, reason: reason).outcome == outcome, "\(status) \(reason?.rawValue ?? "-")")
        }
        #expect(APNsBroadcastOutcome.retry.isRetryable)
        #expect(!APNsBroadcastOutcome.channelNotRegistered.isRetryable)
    }

    @Test func theDocumentedTableAgreesWithTheNotificationTable() {
        let notificationStatuses = Dictionary(APNsReason.documented.map { ($0.reason, $0.status) }, uniquingKeysWith: { first, _ in first })
        for (reason, status) in APNsReason.documentedForBroadcast {
            if let known = notificationStatuses[reason] { #expect(known == status, "\(reason)") }
        }
        #expect(Set(APNsReason.documentedForBroadcast.map(\.reason)).count == APNsReason.documentedForBroadcast.count)
    }

    @Test func storagePolicies() {
        #expect(APNsChannelStoragePolicy(name: "no-message-stored") == .noMessageStored)
        #expect(APNsChannelStoragePolicy(name: "0") == .noMessageStored)
        #expect(APNsChannelStoragePolicy(name: "Most-Recent-Message-Stored") == .mostRecentMessageStored)
        #expect(APNsChannelStoragePolicy(name: "2") == nil)
        #expect(APNsChannelStoragePolicy(rawValue: 7).name == "7")
        #expect(APNsEndpoint.managementProduction.description == "https://api-manage-broadcast.push.apple.com:2196")
        #expect(APNsEndpoint.managementDevelopment.description == "https://api-manage-broadcast.sandbox.push.apple.com:2195")
    }
}
