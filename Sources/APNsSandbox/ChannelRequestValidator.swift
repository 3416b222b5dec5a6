import APNs

import enum PushCore.JSONValue
import struct PushCore.PushType

/// The paths of Apple's broadcast APIs. Apple serves channel management on its own hosts and ports
/// (`api-manage-broadcast[.sandbox].push.apple.com:2196|2195`) and broadcasts on the push hosts;
/// apns-sandbox serves both on its one TLS port, told apart by path.
public enum ChannelRoute: Sendable, Equatable {
    /// `/1/apps/<bundle id>/channels`: POST creates, GET reads, DELETE deletes (`apns-channel-id`).
    case channels(bundleID: String)
    /// `/1/apps/<bundle id>/all-channels`: GET lists the app's channel ids.
    case allChannels(bundleID: String)
    /// `/4/broadcasts/apps/<bundle id>`: POST sends a broadcast on `apns-channel-id`.
    case broadcast(bundleID: String)
    /// Under `/1/` or `/4/` but none of the above: 404 `BadPath`.
    case unknown

    /// The route of `path`; nil for paths that are not the broadcast APIs' (`/3/device/…` and the rest).
    public init?(path: String) {
        guard path.hasPrefix("/1/") || path.hasPrefix("/4/") else { return nil }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let segments = Array(parts)
        if segments.count == 4, segments[0] == "1", segments[1] == "apps", !segments[2].isEmpty {
            switch segments[3] {
            case "channels": self = .channels(bundleID: String(segments[2]))
            case "all-channels": self = .allChannels(bundleID: String(segments[2]))
            default: self = .unknown
            }
        } else if segments.count == 4, segments[0] == "4", segments[1] == "broadcasts", segments[2] == "apps", !segments[3].isEmpty {
            self = .broadcast(bundleID: String(segments[3]))
        } else {
            self = .unknown
        }
    }
}

/// What a valid broadcast or channel-management request asks for.
public enum ChannelOperation: Sendable, Equatable {
    case create(bundleID: String, storagePolicy: APNsChannelStoragePolicy)
    case read(bundleID: String, channelID: String, storagePolicy: APNsChannelStoragePolicy)
    case delete(bundleID: String, channelID: String)
    case list(bundleID: String)
    case broadcast(bundleID: String, channelID: String)
}

/// What ``ChannelRequestValidator`` decided.
public enum ChannelValidation: Sendable, Equatable {
    case accepted(ChannelOperation)
    case rejected(PushRejection)
}

/// Judges a broadcast or channel-management request as APNs does, without I/O: path, method,
/// headers, body, how the connection authenticated and which channels exist → the operation, or
/// APNs' status and reason (Apple's broadcast error table).
///
/// Checks, in this order (the first failure answers):
/// 1. The path (``ChannelRoute``), else 404 `BadPath`; the method it takes, else 405 `MethodNotAllowed`.
/// 2. No header twice, else 400 `DuplicateHeaders`.
/// 3. Authentication as for notifications (403 `BadCertificate`, `MissingProviderToken`, the
///    provider-token reasons); a certificate whose UID names another bundle id: 403 `TopicMismatch`.
/// 4. The bundle id: letters, digits, `-` and `.`, and no push-type suffix, else 400 `TopicDisallowed`.
/// 5. `apns-request-id` (and a broadcast's `apns-id`) a UUID when present, else 400 `BadMessageId`.
/// 6. Read, delete and broadcast: `apns-channel-id` present (400 `MissingChannelId`), base64 of at
///    most ``maximumChannelIDLength`` characters (400 `BadChannelId`), a channel of this app (400
///    `ChannelNotRegistered`).
/// 7. Create: the body a JSON object (400 `BadRequestPayload`) of exactly `message-storage-policy`
///    (the integer 0 or 1) and `push-type` — an unknown attribute or a bad policy is 400
///    `BadRequestParams`, no `push-type` 400 `MissingPushType`, other than `LiveActivity` 400
///    `InvalidPushType`.
/// 8. Broadcast: `apns-push-type` present (400 `MissingPushType`) and `liveactivity` in any case
///    (Apple's pages spell it three ways), else 400 `InvalidPushType`; `apns-priority` 10, 5 or 1
///    (absent: 10; ActivityKit's channel updates take no other), else 400 `BadPriority`;
///    `apns-expiration` present and a non-negative integer, else 400 `BadExpirationDate` (independent
///    clients report APNs refusing a broadcast without it, though the notification API defaults it), and 0 on a
///    No Message Stored channel ("Providing a nonzero expiration for a channel created with the No
///    Message Stored storage policy results in message rejection"), else 400 `BadExpirationDate`;
///    the payload not empty (400 `PayloadEmpty`), at most 5120 bytes (413 `PayloadTooLarge`), a JSON
///    object (400 `BadRequestPayload`).
public enum ChannelRequestValidator {
    /// The longest `apns-channel-id` accepted. Apple documents "greater than the allowed length"
    /// without the length; the sandbox's own ids are 24 characters.
    public static let maximumChannelIDLength = 128

    /// - Parameters:
    ///   - request: The request (its path gave `route`).
    ///   - authentication: How its connection authenticated.
    ///   - providerTokens: Checks `authorization` (ignored on certificate connections).
    ///   - now: Seconds since 1970, for the token's age.
    ///   - storagePolicy: The storage policy of an app's channel; nil when it has no such channel.
    public static func validate(
        _ request: PushRequest,
        route: ChannelRoute,
        authentication: ConnectionAuthentication,
        providerTokens: ProviderTokenVerifier,
        now: Int64,
        storagePolicy: (_ bundleID: String, _ channelID: String) -> APNsChannelStoragePolicy?
    ) -> ChannelValidation {
        let bundleID: String
        switch (route, request.method) {
        case (.unknown, _):
            return .rejected(PushRejection(404, .badPath))
        case (.channels(let bundle), "POST"), (.channels(let bundle), "GET"), (.channels(let bundle), "DELETE"),
            (.allChannels(let bundle), "GET"), (.broadcast(let bundle), "POST"):
            bundleID = bundle
        default:
            return .rejected(PushRejection(405, .methodNotAllowed))
        }

        var seen = Set<String>()
        for field in request.headers where !seen.insert(field.name).inserted {
            return .rejected(PushRejection(400, .duplicateHeaders))
        }

        switch authentication {
        case .certificate(let topic):
            if let topic, topic != bundleID { return .rejected(PushRejection(403, .topicMismatch)) }
        case .untrustedCertificate:
            return .rejected(PushRejection(403, .badCertificate))
        case .none:
            guard let authorization = request.value(of: "authorization") else {
                return .rejected(PushRejection(403, .missingProviderToken))
            }
            if let reason = providerTokens.rejection(authorization: authorization, now: now) {
                return .rejected(PushRejection(403, reason))
            }
        }

        guard APNsBroadcast.isWellFormedBundleID(bundleID), APNsBroadcast.pushTypeSuffix(of: bundleID) == nil else {
            return .rejected(PushRejection(400, .topicDisallowed))
        }
        if let requestID = request.value(of: "apns-request-id"), !PushRequestValidator.isUUID(requestID) {
            return .rejected(PushRejection(400, .badMessageId))
        }

        switch (route, request.method) {
        case (.channels, "POST"):
            switch storagePolicyToCreate(request.body, bodyLength: request.bodyLength) {
            case .found(let policy): return .accepted(.create(bundleID: bundleID, storagePolicy: policy))
            case .rejected(let rejection): return .rejected(rejection)
            }
        case (.channels, "GET"):
            switch channel(of: request, bundleID: bundleID, storagePolicy) {
            case .found(let channel): return .accepted(.read(bundleID: bundleID, channelID: channel.id, storagePolicy: channel.storagePolicy))
            case .rejected(let rejection): return .rejected(rejection)
            }
        case (.channels, _):
            switch channel(of: request, bundleID: bundleID, storagePolicy) {
            case .found(let channel): return .accepted(.delete(bundleID: bundleID, channelID: channel.id))
            case .rejected(let rejection): return .rejected(rejection)
            }
        case (.allChannels, _):
            return .accepted(.list(bundleID: bundleID))
        default:
            return broadcast(request, bundleID: bundleID, storagePolicy)
        }
    }

    /// One check's outcome: what it found, or the refusal.
    private enum Check<Found> {
        case found(Found)
        case rejected(PushRejection)
    }

    /// `apns-channel-id` of a channel the app has.
    private static func channel(
        of request: PushRequest, bundleID: String, _ storagePolicy: (String, String) -> APNsChannelStoragePolicy?
    ) -> Check<(id: String, storagePolicy: APNsChannelStoragePolicy)> {
        guard let channelID = request.value(of: "apns-channel-id"), !channelID.isEmpty else {
            return .rejected(PushRejection(400, .missingChannelId))
        }
        guard channelID.utf8.count <= maximumChannelIDLength, APNsBroadcast.isWellFormedChannelID(channelID) else {
            return .rejected(PushRejection(400, .badChannelId))
        }
        guard let policy = storagePolicy(bundleID, channelID) else { return .rejected(PushRejection(400, .channelNotRegistered)) }
        return .found((channelID, policy))
    }

    /// The create body's storage policy.
    private static func storagePolicyToCreate(_ body: [UInt8], bodyLength: Int) -> Check<APNsChannelStoragePolicy> {
        guard bodyLength == body.count, let json = try? JSONValue.parse(body), case .object(let members) = json else {
            return .rejected(PushRejection(400, .badRequestPayload))
        }
        for member in members where member.key != "message-storage-policy" && member.key != "push-type" {
            return .rejected(PushRejection(400, .badRequestParams))
        }
        guard let pushType = json["push-type"] else { return .rejected(PushRejection(400, .missingPushType)) }
        guard pushType.stringValue == APNsChannelClient.channelPushType else { return .rejected(PushRejection(400, .invalidPushType)) }
        guard let policy = json["message-storage-policy"]?.int64Value,
            let known = APNsChannelStoragePolicy.allCases.first(where: { Int64($0.rawValue) == policy })
        else {
            return .rejected(PushRejection(400, .badRequestParams))
        }
        return .found(known)
    }

    private static func broadcast(
        _ request: PushRequest, bundleID: String, _ storagePolicy: (String, String) -> APNsChannelStoragePolicy?
    ) -> ChannelValidation {
        if let apnsID = request.value(of: "apns-id"), !PushRequestValidator.isUUID(apnsID) {
            return .rejected(PushRejection(400, .badMessageId))
        }
        let channel: (id: String, storagePolicy: APNsChannelStoragePolicy)
        switch self.channel(of: request, bundleID: bundleID, storagePolicy) {
        case .found(let found): channel = found
        case .rejected(let rejection): return .rejected(rejection)
        }
        guard let pushType = request.value(of: "apns-push-type") else { return .rejected(PushRejection(400, .missingPushType)) }
        guard pushType.lowercased() == APNsBroadcast.pushTypeHeader else { return .rejected(PushRejection(400, .invalidPushType)) }
        if let priority = request.value(of: "apns-priority"), !PushType.broadcastPriorities.contains(where: { "\($0)" == priority }) {
            return .rejected(PushRejection(400, .badPriority))
        }
        guard let expiration = request.value(of: "apns-expiration"), PushRequestValidator.isNonNegativeInteger(expiration) else {
            return .rejected(PushRejection(400, .badExpirationDate))
        }
        if channel.storagePolicy == .noMessageStored, expiration.utf8.contains(where: { $0 != UInt8(ascii: "0") }) {
            return .rejected(PushRejection(400, .badExpirationDate))
        }
        guard request.bodyLength > 0 else { return .rejected(PushRejection(400, .payloadEmpty)) }
        guard request.bodyLength <= APNsBroadcast.maximumPayloadSize else { return .rejected(PushRejection(413, .payloadTooLarge)) }
        guard JSONObjectSyntax.isObject(request.body) else { return .rejected(PushRejection(400, .badRequestPayload)) }
        return .accepted(.broadcast(bundleID: bundleID, channelID: channel.id))
    }
}
