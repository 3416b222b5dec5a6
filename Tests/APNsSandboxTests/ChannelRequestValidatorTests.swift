import APNs
import APNsSandbox
import Foundation
import TestSupport
import Testing

/// ``ChannelRequestValidator`` without I/O: routes, the order of the checks, certificate
/// connections (which the process tests do not cover).
@Suite struct ChannelRequestValidatorTests {
    static let channel = "dHN0LXNyY2gtY2hubA=="
    let verifier = ProviderTokenVerifier()

    func validate(
        method: String = "GET", path: String = "/1/apps/com.example.app/channels", headers: [PushRequest.Field]? = nil, body: String = "",
        authentication: ConnectionAuthentication = .none,
        known: [String: APNsChannelStoragePolicy] = [ChannelRequestValidatorTests.channel: .noMessageStored]
    ) -> ChannelValidation {
        let fields = headers ?? [PushRequest.Field("authorization", SandboxProcess.bearer()), PushRequest.Field("apns-channel-id", Self.channel)]
        let request = PushRequest(method: method, path: path, headers: fields, body: Array(body.utf8))
        guard let route = ChannelRoute(path: path) else { return .rejected(PushRejection(0, APNsReason("not a channel route"))) }
        return ChannelRequestValidator.validate(
            request, route: route, authentication: authentication, providerTokens: verifier, now: Int64(Date().timeIntervalSince1970),
            storagePolicy: { bundleID, channelID in bundleID == "com.example.app" ? known[channelID] : nil }
        )
    }

    @Test func routesTellTheAPIsApartByPath() {
        #expect(ChannelRoute(path: "/1/apps/com.example.app/channels") == .channels(bundleID: "com.example.app"))
        #expect(ChannelRoute(path: "/1/apps/com.example.app/all-channels") == .allChannels(bundleID: "com.example.app"))
        #expect(ChannelRoute(path: "/4/broadcasts/apps/com.example.app") == .broadcast(bundleID: "com.example.app"))
        #expect(ChannelRoute(path: "/1/apps/com.example.app/channels/x") == .unknown)
        #expect(ChannelRoute(path: "/4/broadcasts/apps/") == .unknown)
        #expect(ChannelRoute(path: "/4/broadcasts/com.example.app") == .unknown)
        #expect(ChannelRoute(path: "/3/device/abcd") == nil)
        #expect(ChannelRoute(path: "/") == nil)
    }

    @Test func theOperations() {
        #expect(validate() == .accepted(.read(bundleID: "com.example.app", channelID: Self.channel, storagePolicy: .noMessageStored)))
        #expect(validate(method: "DELETE") == .accepted(.delete(bundleID: "com.example.app", channelID: Self.channel)))
        #expect(validate(path: "/1/apps/com.example.app/all-channels") == .accepted(.list(bundleID: "com.example.app")))
        #expect(
            validate(method: "POST", body: #"{"push-type":"LiveActivity","message-storage-policy":1}"#)
                == .accepted(.create(bundleID: "com.example.app", storagePolicy: .mostRecentMessageStored)))
        let broadcast = validate(
            method: "POST", path: "/4/broadcasts/apps/com.example.app",
            headers: [
                PushRequest.Field("authorization", SandboxProcess.bearer()), PushRequest.Field("apns-channel-id", Self.channel),
                PushRequest.Field("apns-push-type", "liveactivity"), PushRequest.Field("apns-expiration", "0"),
            ], body: #"{"aps":{"event":"update"}}"#)
        #expect(broadcast == .accepted(.broadcast(bundleID: "com.example.app", channelID: Self.channel)))
    }

    @Test func certificateConnectionsNeedTheirBundleID() {
        let read = ChannelValidation.accepted(.read(bundleID: "com.example.app", channelID: Self.channel, storagePolicy: .noMessageStored))
        #expect(validate(authentication: .certificate(topic: "com.example.app")) == read)
        #expect(validate(headers: [PushRequest.Field("apns-channel-id", Self.channel)], authentication: .certificate(topic: nil)) == read)
        #expect(validate(authentication: .certificate(topic: "com.example.other")) == .rejected(PushRejection(403, .topicMismatch)))
        #expect(validate(authentication: .untrustedCertificate) == .rejected(PushRejection(403, .badCertificate)))
    }

    @Test func authenticationComesBeforeTheChannel() {
        // An unknown channel without a token: the token is what APNs checks first.
        let unknown = "AAAAAAAAAAAAAAAAAAAAAA=="
        #expect(validate(headers: [PushRequest.Field("apns-channel-id", unknown)]) == .rejected(PushRejection(403, .missingProviderToken)))
        #expect(
            validate(headers: [PushRequest.Field("authorization", SandboxProcess.bearer()), PushRequest.Field("apns-channel-id", unknown)])
                == .rejected(PushRejection(400, .channelNotRegistered)))
        // The path and method come first of all.
        #expect(validate(method: "PATCH", headers: []) == .rejected(PushRejection(405, .methodNotAllowed)))
        #expect(validate(path: "/1/apps/com.example.app/channel", headers: []) == .rejected(PushRejection(404, .badPath)))
    }

    @Test func repeatedHeadersAndOverlongChannelIDs() {
        let repeated = [
            PushRequest.Field("authorization", SandboxProcess.bearer()), PushRequest.Field("apns-channel-id", Self.channel),
            PushRequest.Field("apns-channel-id", Self.channel),
        ]
        #expect(validate(headers: repeated) == .rejected(PushRejection(400, .duplicateHeaders)))
        let long = String(repeating: "A", count: ChannelRequestValidator.maximumChannelIDLength + 4)
        #expect(
            validate(headers: [PushRequest.Field("authorization", SandboxProcess.bearer()), PushRequest.Field("apns-channel-id", long)])
                == .rejected(PushRejection(400, .badChannelId)))
    }

    @Test func createBodiesAreReadStrictly() {
        let cases: [(String, PushRejection)] = [
            (#"{"message-storage-policy":0,"push-type":"LiveActivity","message-storage-policy":1}"#, PushRejection(400, .badRequestPayload)),
            (#"[0,"LiveActivity"]"#, PushRejection(400, .badRequestPayload)),
            (#"{"message-storage-policy":0.5,"push-type":"LiveActivity"}"#, PushRejection(400, .badRequestParams)),
            (#"{"message-storage-policy":"1","push-type":"LiveActivity"}"#, PushRejection(400, .badRequestParams)),
            (#"{"message-storage-policy":-1,"push-type":"LiveActivity"}"#, PushRejection(400, .badRequestParams)),
            (#"{"message-storage-policy":1,"push-type":null}"#, PushRejection(400, .invalidPushType)),
        ]
        for (body, rejection) in cases {
            #expect(validate(method: "POST", body: body) == .rejected(rejection), "\(body)")
        }
    }
}
