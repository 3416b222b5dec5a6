import APNs
import Foundation
import PushCore
import Testing

@Suite struct PushTypeTests {
    @Test(arguments: [
        ("alert", "com.example.game"), ("background", "com.example.game"), ("voip", "com.example.game.voip"),
        ("complication", "com.example.game.complication"), ("fileprovider", "com.example.game.pushkit.fileprovider"),
        ("location", "com.example.game.location-query"), ("liveactivity", "com.example.game.push-type.liveactivity"),
        ("pushtotalk", "com.example.game.voip-ptt"), ("widgets", "com.example.game.push-type.widgets"),
        ("controls", "com.example.game.push-type.controls"), ("mdm", "com.example.game"),
    ])
    func eachTypeGetsTheTopicAppleRequires(type: String, topic: String) throws {
        let pushType = try #require(PushType(rawValue: type))
        #expect(pushType.topic(forBundleID: "com.example.game") == topic)
        // Idempotent: a topic that already has the suffix is kept.
        #expect(pushType.topic(forBundleID: topic) == topic)
    }

    @Test func unknownTypesAreNotInvented() {
        #expect(PushType(rawValue: "Alert") == nil)
        #expect(PushType(rawValue: "silent") == nil)
        #expect(PushType.allCases.count == 11)
    }

    @Test func voipAllowsLargerPayloads() {
        #expect(PushType.voip.maximumPayloadSize == 5120)
        #expect(PushType.alert.maximumPayloadSize == 4096)
    }
}

@Suite struct APNsNotificationTests {
    static let token = String(repeating: "ab", count: 32)

    func notification(_ change: (inout APNsNotification) -> Void = { _ in }) -> APNsNotification {
        var notification = APNsNotification(deviceToken: Self.token, topic: "com.example.game", payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        change(&notification)
        return notification
    }

    /// The priorities each type takes are the push requests' rule (``PushCore/PushType/allowedPriorities``).
    @Test(arguments: PushType.allCases.filter { $0 != .mdm })
    func everyAllowedPriorityPassesAndNoOther(_ type: PushType) throws {
        for priority in APNsPriority.allCases {
            let candidate = notification {
                $0.pushType = type
                $0.topic = type.topic(forBundleID: "com.example.game")
                $0.priority = priority
            }
            if type.allowedPriorities.contains(priority.rawValue) {
                try candidate.validate()
            } else {
                #expect(throws: APNsRequestError.self, "\(type) at \(priority.rawValue)") { try candidate.validate() }
            }
        }
    }

    @Test func aWellFormedNotificationPasses() throws {
        try notification().validate()
        try notification { $0.collapseID = String(repeating: "c", count: 64) }.validate()
        try notification {
            $0.pushType = .voip
            $0.topic = "com.example.game.voip"
            $0.payload = Array(repeating: 32, count: 5120)
        }.validate()
    }

    /// One defect each, and the field APNs would name.
    enum Defect: String, CaseIterable, Sendable {
        case notHex, upperCaseToken, emptyTopic, voipTopicWithoutSuffix, longCollapseID, negativeExpiration, emptyPayload, largePayload
        case backgroundAtPriority10, liveActivityAtPriority1

        var field: String {
            switch self {
            case .backgroundAtPriority10, .liveActivityAtPriority1: "apns-priority"
            case .notHex, .upperCaseToken: "device_token"
            case .emptyTopic, .voipTopicWithoutSuffix: "apns-topic"
            case .longCollapseID: "apns-collapse-id"
            case .negativeExpiration: "apns-expiration"
            case .emptyPayload, .largePayload: "payload"
            }
        }

        func apply(to notification: inout APNsNotification) {
            switch self {
            case .notHex: notification.deviceToken = "xyz"
            case .upperCaseToken: notification.deviceToken = String(repeating: "AB", count: 32)
            case .emptyTopic: notification.topic = ""
            case .voipTopicWithoutSuffix: notification.pushType = .voip
            case .longCollapseID: notification.collapseID = String(repeating: "é", count: 33)
            case .negativeExpiration: notification.expiration = -1
            case .emptyPayload: notification.payload = []
            case .largePayload: notification.payload = Array(repeating: 32, count: 4097)
            // Apple: "Using priority 10 is an error" for a background push.
            case .backgroundAtPriority10:
                notification.pushType = .background
                notification.priority = .immediate
            case .liveActivityAtPriority1:
                notification.pushType = .liveactivity
                notification.topic = "com.example.game.push-type.liveactivity"
                notification.priority = .low
            }
        }
    }

    @Test(arguments: Defect.allCases)
    func whatAPNsWouldRefuseIsRefusedNamingTheField(_ defect: Defect) {
        #expect {
            try notification { defect.apply(to: &$0) }.validate()
        } throws: { error in
            (error as? APNsRequestError)?.field == defect.field
        }
    }

    @Test func headersCarryEveryOption() {
        let id = UUID(uuidString: "123E4567-E89B-12D3-A456-426614174000")!
        let headers = notification {
            $0.pushType = .background
            $0.priority = .conserveEnergy
            $0.expiration = 1_767_225_600
            $0.collapseID = "order-4711"
            $0.apnsID = id
        }.headers(authority: "api.push.apple.com", authorization: "bearer x.y.z")
        let byName = Dictionary(headers.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(headers.first?.name == ":method")
        #expect(headers.prefix(4).allSatisfy { $0.name.hasPrefix(":") })
        #expect(byName[":path"] == "/3/device/\(Self.token)")
        #expect(byName["apns-push-type"] == "background")
        #expect(byName["apns-priority"] == "5")
        #expect(byName["apns-expiration"] == "1767225600")
        #expect(byName["apns-collapse-id"] == "order-4711")
        #expect(byName["apns-id"] == "123e4567-e89b-12d3-a456-426614174000")
        #expect(byName["authorization"] == "bearer x.y.z")
        #expect(headers.count == byName.count, "no duplicate headers")
    }
}

@Suite struct APNsOutcomeTests {
    @Test func everyDocumentedReasonHasAClassification() {
        for (reason, status) in APNsReason.documented {
            let outcome = APNsOutcome(status: status, reason: reason, timestamp: status == 410 ? 1_700_000_000_000 : nil)
            switch reason {
            case .unregistered, .expiredToken:
                #expect(outcome == .invalidToken(since: 1_700_000_000_000), "\(reason)")
            case .badDeviceToken, .deviceTokenNotForTopic:
                #expect(outcome == .invalidToken(since: nil), "\(reason)")
            case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable, .shutdown, .idleTimeout:
                #expect(outcome == .retry, "\(reason)")
            case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
                .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken:
                #expect(outcome == .credentialProblem, "\(reason)")
            default:
                #expect(outcome == .permanentFailure, "\(reason)")
            }
        }
        #expect(APNsReason.documented.count == 32)
    }

    /// Apple's table and APNs' answers spell two reasons differently; both mean the same.
    @Test func bothSpellingsOfAReasonClassifyTheSame() {
        let pairs: [(answer: APNsReason, table: APNsReason, status: Int)] = [
            (.badEnvironmentKeyInToken, .badEnvironmentKeyIdInToken, 403), (.broadcastFeatureNotEnabled, .featureNotEnabled, 400),
        ]
        for (answer, table, status) in pairs {
            #expect(answer.canonical == table)
            #expect(table.canonical == table)
            #expect(APNsReason.isDocumented(answer) && APNsReason.isDocumented(table))
            #expect(
                APNsOutcome(status: status, reason: answer, timestamp: nil) == APNsOutcome(status: status, reason: table, timestamp: nil),
                "\(answer)")
            #expect(APNsBroadcastOutcome(status: status, reason: answer) == APNsBroadcastOutcome(status: status, reason: table), "\(answer)")
        }
        #expect(APNsOutcome(status: 403, reason: .badEnvironmentKeyInToken, timestamp: nil) == .credentialProblem)
        #expect(!APNsReason.isDocumented(APNsReason("SomethingNew")))
    }

    @Test func statusesWithoutAKnownReasonStillClassify() {
        #expect(APNsOutcome(status: 200, reason: nil, timestamp: nil) == .delivered)
        #expect(APNsOutcome(status: 502, reason: nil, timestamp: nil) == .retry)
        #expect(APNsOutcome(status: 403, reason: APNsReason("SomethingNew"), timestamp: nil) == .credentialProblem)
        #expect(APNsOutcome(status: 400, reason: APNsReason("SomethingNew"), timestamp: nil) == .permanentFailure)
    }

    @Test func responseBodiesAreParsedAndUnknownTextKept() {
        let gone = APNsResponse(
            status: 410, apnsID: "id", apnsUniqueID: nil, body: Array(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8))
        #expect(gone.reason == .unregistered)
        #expect(gone.timestamp == 1_700_000_000_000)
        #expect(gone.outcome == .invalidToken(since: 1_700_000_000_000))
        let odd = APNsResponse(status: 500, apnsID: nil, apnsUniqueID: nil, body: Array("upstream failure".utf8))
        #expect(odd.reason?.rawValue == "upstream failure")
        #expect(odd.outcome == .retry)
    }
}
