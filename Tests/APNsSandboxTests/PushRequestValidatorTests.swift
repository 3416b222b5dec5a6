import APNs
import Crypto
import Testing

import struct PushCore.PushType

@testable import APNsSandbox

@Suite("PushRequestValidator: every reason APNs gives for a bad request")
struct PushRequestValidatorTests {
    static let token = String(repeating: "ab", count: 32)
    static let signingKey = try! APNsSigningKey(p8: P256.Signing.PrivateKey().pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    static let now: Int64 = 1_800_000_000

    static func bearer(issuedAt: Int64 = now) -> String {
        "bearer \(try! signingKey.providerToken(issuedAt: issuedAt))"
    }

    /// A request that is accepted, with `changes` applied.
    static func request(
        method: String = "POST",
        path: String = "/3/device/\(token)",
        headers: [(String, String)]? = nil,
        adding extra: [(String, String)] = [],
        removing: Set<String> = [],
        body: String = #"{"aps":{"alert":"hi"}}"#
    ) -> PushRequest {
        let base = headers ?? [("apns-topic", "com.example.app"), ("apns-push-type", "alert"), ("authorization", bearer())]
        let fields = (base.filter { !removing.contains($0.0) } + extra).map { PushRequest.Field($0.0, $0.1) }
        return PushRequest(method: method, path: path, headers: fields, body: Array(body.utf8))
    }

    static func validate(
        _ request: PushRequest,
        authentication: ConnectionAuthentication = .none,
        verifier: ProviderTokenVerifier = ProviderTokenVerifier()
    ) -> PushValidation {
        PushRequestValidator.validate(request, authentication: authentication, providerTokens: verifier, now: now)
    }

    static func expect(
        _ request: PushRequest, _ status: Int, _ reason: APNsReason, authentication: ConnectionAuthentication = .none,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(validate(request, authentication: authentication) == .rejected(PushRejection(status, reason)), sourceLocation: sourceLocation)
    }

    @Test func acceptsAWellFormedNotificationAndLowercasesTheToken() {
        let upper = String(repeating: "AB", count: 32)
        #expect(
            Self.validate(Self.request(path: "/3/device/\(upper)"))
                == .accepted(AcceptedPush(deviceToken: Self.token, topic: "com.example.app", pushType: .alert)))
    }

    /// By default any of 10, 5, 1 passes (as Apple's servers are seen to answer); the strict mode
    /// refuses what the push type does not allow, with APNs' reason.
    @Test func strictPrioritiesFollowThePushType() {
        let background = Self.request(
            headers: [("apns-topic", "com.example.app"), ("apns-push-type", "background"), ("authorization", Self.bearer())],
            adding: [("apns-priority", "10")], body: #"{"aps":{"content-available":1}}"#)
        #expect(Self.validate(background) != .rejected(PushRejection(400, .badPriority)))
        let strict = PushRequestValidator.validate(
            background, authentication: .none, providerTokens: ProviderTokenVerifier(), now: Self.now, strictPriorities: true)
        #expect(strict == .rejected(PushRejection(400, .badPriority)))
        // No apns-priority means 10: a background push without one is refused too.
        let implicit = Self.request(
            headers: [("apns-topic", "com.example.app"), ("apns-push-type", "background"), ("authorization", Self.bearer())],
            body: #"{"aps":{"content-available":1}}"#)
        #expect(
            PushRequestValidator.validate(
                implicit, authentication: .none, providerTokens: ProviderTokenVerifier(), now: Self.now, strictPriorities: true)
                == .rejected(PushRejection(400, .badPriority)))
        let alertLow = Self.request(adding: [("apns-priority", "1")])
        #expect(
            PushRequestValidator.validate(
                alertLow, authentication: .none, providerTokens: ProviderTokenVerifier(), now: Self.now, strictPriorities: true)
                != .rejected(PushRejection(400, .badPriority)))
    }

    @Test func methodAndPath() {
        Self.expect(Self.request(method: "GET"), 405, .methodNotAllowed)
        Self.expect(Self.request(path: "/3/devices/\(Self.token)"), 404, .badPath)
        Self.expect(Self.request(path: "/"), 404, .badPath)
        Self.expect(Self.request(path: "/3/device/"), 400, .missingDeviceToken)
        Self.expect(Self.request(path: "/3/device"), 400, .missingDeviceToken)
    }

    @Test func deviceTokenFormat() {
        Self.expect(Self.request(path: "/3/device/" + String(repeating: "a", count: 62)), 400, .badDeviceToken)
        Self.expect(Self.request(path: "/3/device/" + String(repeating: "a", count: 65)), 400, .badDeviceToken)
        Self.expect(Self.request(path: "/3/device/" + String(repeating: "a", count: 202)), 400, .badDeviceToken)
        Self.expect(Self.request(path: "/3/device/" + String(repeating: "g", count: 64)), 400, .badDeviceToken)
        Self.expect(Self.request(path: "/3/device/\(Self.token)/x"), 400, .badDeviceToken)
        #expect(
            Self.validate(Self.request(path: "/3/device/" + String(repeating: "0", count: 200))) != .rejected(PushRejection(400, .badDeviceToken)))
    }

    @Test func duplicateHeaders() {
        Self.expect(Self.request(adding: [("apns-topic", "com.example.app")]), 400, .duplicateHeaders)
        Self.expect(Self.request(adding: [("x-custom", "1"), ("x-custom", "2")]), 400, .duplicateHeaders)
    }

    @Test func providerTokenPresence() {
        Self.expect(Self.request(removing: ["authorization"]), 403, .missingProviderToken)
        Self.expect(Self.request(removing: ["authorization"], body: ""), 403, .missingProviderToken)
        Self.expect(Self.request(headers: [("apns-topic", "com.example.app"), ("authorization", "bearer not-a-jwt")]), 403, .invalidProviderToken)
        Self.expect(
            Self.request(headers: [("apns-topic", "com.example.app"), ("authorization", Self.bearer(issuedAt: Self.now - 3601))]), 403,
            .expiredProviderToken)
    }

    @Test func certificateConnections() {
        let noJWT = Self.request(removing: ["authorization"])
        #expect(
            Self.validate(noJWT, authentication: .certificate(topic: nil))
                == .accepted(AcceptedPush(deviceToken: Self.token, topic: "com.example.app", pushType: .alert)))
        // No apns-topic: the certificate's UID is the topic.
        let noTopic = Self.request(removing: ["authorization", "apns-topic"])
        #expect(
            Self.validate(noTopic, authentication: .certificate(topic: "com.example.cert"))
                == .accepted(AcceptedPush(deviceToken: Self.token, topic: "com.example.cert", pushType: .alert)))
        Self.expect(noTopic, 400, .missingTopic, authentication: .certificate(topic: nil))
        Self.expect(noJWT, 403, .badCertificate, authentication: .untrustedCertificate)
    }

    @Test func pushTypeAndTopic() {
        Self.expect(Self.request(adding: [("apns-push-type", "banner")], removing: ["apns-push-type"]), 400, .invalidPushType)
        Self.expect(Self.request(removing: ["apns-topic"]), 400, .missingTopic)
        Self.expect(Self.request(removing: ["apns-topic"], body: ""), 400, .missingTopic)
        Self.expect(Self.request(adding: [("apns-push-type", "voip")], removing: ["apns-push-type"]), 400, .badTopic)
        for type in PushType.allCases {
            let request = Self.request(
                headers: [
                    ("apns-topic", type.topic(forBundleID: "com.example.app")), ("apns-push-type", type.rawValue), ("authorization", Self.bearer()),
                ]
            )
            #expect(
                Self.validate(request)
                    == .accepted(AcceptedPush(deviceToken: Self.token, topic: type.topic(forBundleID: "com.example.app"), pushType: type)))
        }
        // No apns-push-type: an alert.
        #expect(
            Self.validate(Self.request(removing: ["apns-push-type"]))
                == .accepted(AcceptedPush(deviceToken: Self.token, topic: "com.example.app", pushType: .alert)))
    }

    @Test func headerValues() {
        for priority in ["10", "5", "1"] {
            #expect(Self.validate(Self.request(adding: [("apns-priority", priority)])) != .rejected(PushRejection(400, .badPriority)))
        }
        for priority in ["0", "11", "high", ""] {
            Self.expect(Self.request(adding: [("apns-priority", priority)]), 400, .badPriority)
        }
        #expect(Self.validate(Self.request(adding: [("apns-expiration", "0")])) != .rejected(PushRejection(400, .badExpirationDate)))
        for expiration in ["-1", "tomorrow", "1.5", ""] {
            Self.expect(Self.request(adding: [("apns-expiration", expiration)]), 400, .badExpirationDate)
        }
        #expect(
            Self.validate(Self.request(adding: [("apns-collapse-id", String(repeating: "c", count: 64))]))
                != .rejected(PushRejection(400, .badCollapseId)))
        Self.expect(Self.request(adding: [("apns-collapse-id", String(repeating: "c", count: 65))]), 400, .badCollapseId)
        #expect(
            Self.validate(Self.request(adding: [("apns-id", "EABEAE54-14A8-11E5-B60B-1697F925EC7B")])) != .rejected(PushRejection(400, .badMessageId))
        )
        for id in ["not-a-uuid", "eabeae5414a811e5b60b1697f925ec7b", "eabeae54-14a8-11e5-b60b-1697f925ec7", "eabeae54-14a8-11e5-b60b-1697f925ec7g"] {
            Self.expect(Self.request(adding: [("apns-id", id)]), 400, .badMessageId)
        }
    }

    @Test func payload() {
        Self.expect(Self.request(body: ""), 400, .payloadEmpty)
        Self.expect(Self.request(body: "not json"), 400, .payloadEmpty)
        Self.expect(Self.request(body: "[1,2]"), 400, .payloadEmpty)
        let padding4096 = String(repeating: "x", count: 4096 - #"{"a":""}"#.utf8.count)
        #expect(Self.validate(Self.request(body: #"{"a":"\#(padding4096)"}"#)) != .rejected(PushRejection(413, .payloadTooLarge)))
        Self.expect(Self.request(body: #"{"a":"\#(padding4096)x"}"#), 413, .payloadTooLarge)
        let voip = [("apns-topic", "com.example.app.voip"), ("apns-push-type", "voip"), ("authorization", Self.bearer())]
        let padding5120 = String(repeating: "x", count: 5120 - #"{"a":""}"#.utf8.count)
        #expect(Self.validate(Self.request(headers: voip, body: #"{"a":"\#(padding5120)"}"#)) != .rejected(PushRejection(413, .payloadTooLarge)))
        Self.expect(Self.request(headers: voip, body: #"{"a":"\#(padding5120)x"}"#), 413, .payloadTooLarge)
        // A body longer than what the server keeps is judged by its full length.
        var long = Self.request()
        long.bodyLength = 100_000
        Self.expect(long, 413, .payloadTooLarge)
    }

    @Test func rejectionBodies() {
        #expect(String(decoding: PushRejection(400, .badTopic).body, as: UTF8.self) == #"{"reason":"BadTopic"}"#)
        #expect(
            String(decoding: PushRejection(410, .unregistered, timestamp: 1234).body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1234}"#
        )
    }

    @Test func echoesOnlyValidAPNsIDs() {
        #expect(Self.request(adding: [("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b")]).validAPNsID == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        #expect(Self.request(adding: [("apns-id", "nope")]).validAPNsID == nil)
    }
}
