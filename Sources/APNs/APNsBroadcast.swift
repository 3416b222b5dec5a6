import Foundation
import PushCore

/// One Live Activity update (or end) sent on a broadcast channel (iOS 18+): one request, and APNs
/// delivers it to every device subscribed to the channel, however many there are. Apple's "Sending
/// broadcast push notification requests to APNs".
///
/// On the wire: `POST /4/broadcasts/apps/<bundle id>` on the push endpoint (the one device
/// notifications use), with `apns-channel-id`, `apns-push-type: liveactivity`, `apns-priority`,
/// `apns-expiration` (both always sent), `apns-request-id` when given, and the JSON payload (at most
/// 5120 bytes). There is no `apns-topic`: the bundle id in the path names the app, bare (APNs answers
/// `TopicDisallowed` to one with a push-type suffix).
///
/// ```swift
/// let broadcast = APNsBroadcast(bundleID: "com.example.app", channelID: channelID, priority: .immediate,
///                               expiration: 0, requestID: UUID(), payload: Array(json.utf8))
/// let response = try await client.send(broadcast)   // APNs' answer, whatever its status
/// switch response.outcome { case .delivered: …; case .retry: …; case .channelNotRegistered: … }
/// ```
public struct APNsBroadcast: Sendable, Equatable {
    /// The app's bundle id, without a push-type suffix: the path `/4/broadcasts/apps/<bundle id>`.
    public var bundleID: String
    /// `apns-channel-id`: the base64 id APNs gave the channel when it was created.
    public var channelID: String
    /// `apns-priority`: 10 (``APNsPriority/immediate``, counts toward the Live Activity budget) or 5
    /// (``APNsPriority/conserveEnergy``); ActivityKit's channel updates take no other.
    public var priority: APNsPriority
    /// `apns-expiration`: seconds since 1970 until which APNs may store the update for offline
    /// devices (at most 8 hours, on a Most Recent Message Stored channel); 0 = deliver once, store
    /// nothing — the only value a No Message Stored channel accepts.
    public var expiration: Int64
    /// `apns-request-id`: identifies the request in APNs' answer; APNs makes one up when nil.
    public var requestID: UUID?
    /// The channel's storage policy when the caller knows it: then a nonzero expiration on a No
    /// Message Stored channel is refused before sending instead of by APNs (`BadExpirationDate`).
    public var storagePolicy: APNsChannelStoragePolicy?
    /// The JSON payload (`{"aps": {"timestamp": …, "event": "update", "content-state": {…}}}`),
    /// already serialised.
    public var payload: [UInt8]

    /// APNs' limit for a broadcast payload: 5 KB.
    public static let maximumPayloadSize = 5120

    public init(
        bundleID: String, channelID: String, priority: APNsPriority = .immediate, expiration: Int64 = 0, requestID: UUID? = nil,
        storagePolicy: APNsChannelStoragePolicy? = nil, payload: [UInt8]
    ) {
        self.bundleID = bundleID
        self.channelID = channelID
        self.priority = priority
        self.expiration = expiration
        self.requestID = requestID
        self.storagePolicy = storagePolicy
        self.payload = payload
    }

    /// Checks what APNs would refuse with a 400 or 413, so such a broadcast is never sent. The error
    /// names the field and the reason APNs would give.
    public func validate() throws(APNsRequestError) {
        try Self.checkBundleID(bundleID)
        try Self.checkChannelID(channelID)
        guard PushType.broadcastPriorities.contains(priority.rawValue) else {
            throw APNsRequestError(
                field: "apns-priority", "a broadcast takes 10, 5 or 1 (got \(priority.rawValue)); APNs answers BadPriority")
        }
        guard expiration >= 0 else {
            throw APNsRequestError(field: "apns-expiration", "must be 0 or seconds since 1970 (got \(expiration)); APNs answers BadExpirationDate")
        }
        if storagePolicy == .noMessageStored, expiration != 0 {
            throw APNsRequestError(
                field: "apns-expiration",
                "must be 0 on a No Message Stored channel (got \(expiration)); APNs answers BadExpirationDate")
        }
        guard !payload.isEmpty else { throw APNsRequestError(field: "payload", "must not be empty; APNs answers PayloadEmpty") }
        guard payload.count <= Self.maximumPayloadSize else {
            throw APNsRequestError(
                field: "payload", "is \(payload.count) bytes; a broadcast allows \(Self.maximumPayloadSize); APNs answers PayloadTooLarge")
        }
    }

    /// The request as it goes on the wire.
    var wireRequest: APNsHTTPRequest {
        var headers: [(name: String, value: String)] = [
            ("apns-channel-id", channelID),
            ("apns-push-type", Self.pushTypeHeader),
            ("apns-priority", String(priority.rawValue)),
            ("apns-expiration", String(expiration)),
        ]
        if let requestID { headers.append(("apns-request-id", requestID.uuidString.lowercased())) }
        return APNsHTTPRequest(method: "POST", path: "/4/broadcasts/apps/\(bundleID)", headers: headers, body: payload)
    }

    /// `apns-push-type` of a broadcast. Apple's pages spell it `liveactivity` (ActivityKit's channel
    /// section, the broadcast page's requests), `Liveactivity` (the broadcast header table) and
    /// `LiveActivity` (the error table, the channel body's `push-type`); the client sends the form of
    /// Apple's request samples, apns-sandbox accepts any case.
    public static let pushTypeHeader = "liveactivity"

    // MARK: Rules shared with channel management and apns-sandbox

    /// Bundle ids as Apple issues them: letters, digits, hyphens and periods.
    public static func isWellFormedBundleID(_ bundleID: String) -> Bool {
        !bundleID.isEmpty && bundleID.utf8.count <= 255
            && bundleID.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            }
    }

    /// The push-type suffix a bundle id ends with (`.push-type.liveactivity`, `.voip`, …), which
    /// broadcast and channel paths must not carry (APNs: `TopicDisallowed`); nil when none.
    public static func pushTypeSuffix(of bundleID: String) -> String? {
        PushType.allCases.map(\.topicSuffix).first { !$0.isEmpty && bundleID.hasSuffix($0) }
    }

    /// Channel ids are base64 (standard alphabet, `=` padding); Apple sets no length ("don't make
    /// assumptions on the channel ID size").
    public static func isWellFormedChannelID(_ channelID: String) -> Bool {
        PushRequest.isWellFormedChannelID(channelID)
    }

    static func checkBundleID(_ bundleID: String) throws(APNsRequestError) {
        guard isWellFormedBundleID(bundleID) else {
            throw APNsRequestError(field: "bundle_id", "'\(bundleID)' must be a bundle id: letters, digits, hyphens and periods")
        }
        if let suffix = pushTypeSuffix(of: bundleID) {
            throw APNsRequestError(field: "bundle_id", "'\(bundleID)' must be the bare bundle id, without '\(suffix)'; APNs answers TopicDisallowed")
        }
    }

    static func checkChannelID(_ channelID: String) throws(APNsRequestError) {
        guard !channelID.isEmpty else { throw APNsRequestError(field: "apns-channel-id", "is missing; APNs answers MissingChannelId") }
        guard isWellFormedChannelID(channelID) else {
            throw APNsRequestError(field: "apns-channel-id", "'\(channelID)' is not base64; APNs answers BadChannelId")
        }
    }
}

/// APNs' answer to one broadcast.
public struct APNsBroadcastResponse: Sendable, Equatable {
    /// 200 accepted; 400, 403, 404, 405, 413, 429, 500, 503 refused.
    public var status: Int
    /// `apns-request-id`: the one sent, or the one APNs made up.
    public var requestID: String?
    /// Why it was refused; nil when accepted.
    public var reason: APNsReason?
    /// From the request's stream opening to the answer (nil when built by hand).
    public var roundTrip: Duration?

    public init(status: Int, requestID: String? = nil, reason: APNsReason? = nil) {
        self.status = status
        self.requestID = requestID
        self.reason = reason
    }

    init(answer: APNsAnswer) {
        self.init(status: answer.status, requestID: answer.apnsRequestID, reason: answer.reason)
        roundTrip = answer.roundTrip
    }

    /// What to do about it.
    public var outcome: APNsBroadcastOutcome { APNsBroadcastOutcome(status: status, reason: reason) }
}

/// What to do about APNs' answer to a broadcast (or a channel request).
public enum APNsBroadcastOutcome: Sendable, Equatable {
    /// 200: APNs accepted it for every subscriber.
    case delivered
    /// Try again later (429, 500, 503, an idle or shut-down connection).
    case retry
    /// The channel does not exist for the app (`ChannelNotRegistered`, never created or deleted) or
    /// its id is malformed (`BadChannelId`, `MissingChannelId`): stop sending on it.
    case channelNotRegistered
    /// The request itself is wrong (priority, expiration, payload, push type, bundle id): retrying
    /// the same cannot help.
    case permanentFailure
    /// The app's credentials are wrong or expired, not for this bundle id (`TopicMismatch`), or the
    /// app has no Broadcast capability (`FeatureNotEnabled`): its broadcasts should pause until fixed.
    case credentialProblem

    /// Classifies an answer. `reason` is nil for a 2xx or when APNs gave none.
    public init(status: Int, reason: APNsReason?) {
        switch (status, reason?.canonical) {
        case (200..<300, _):
            self = .delivered
        case (_, .channelNotRegistered?), (_, .badChannelId?), (_, .missingChannelId?):
            self = .channelNotRegistered
        case (_, .idleTimeout?), (_, .shutdown?), (_, .tooManyRequests?), (_, .tooManyProviderTokenUpdates?), (429, _), (500...599, _):
            self = .retry
        case (403, _), (_, .featureNotEnabled?):
            self = .credentialProblem
        default:
            self = .permanentFailure
        }
    }

    /// Whether sending the same request again later can succeed.
    public var isRetryable: Bool { self == .retry }
}

extension APNsClient {
    /// Sends one broadcast on a channel and returns APNs' answer, whatever its status (see
    /// ``APNsBroadcastResponse/outcome``). It goes to this client's endpoint, the push endpoint
    /// (`api.push.apple.com`, `api.sandbox.push.apple.com`, or apns-sandbox), on the connections
    /// notifications use.
    ///
    /// Throws only when there is no answer: `invalidRequest` (checked before sending, see
    /// ``APNsBroadcast/validate()``; the message names the field), `overloaded`, `timeout`,
    /// `connectFailed`, `connectionLost` (APNs may or may not have accepted it), `credentials`,
    /// `shutdown` — as sending a notification does.
    public func send(_ broadcast: APNsBroadcast, timeout: Duration? = nil) async throws(APNsClientError) -> APNsBroadcastResponse {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<APNsBroadcastResponse, APNsClientError>, Never>) in
            send(broadcast, timeout: timeout) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Sends one broadcast and calls `completion` exactly once with APNs' answer or the error that
    /// says why there is none. `completion` runs on one of the client's connection threads (or the
    /// caller's, when the broadcast fails before it is queued): keep it short and never block in it.
    public func send(
        _ broadcast: APNsBroadcast, timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<APNsBroadcastResponse, APNsClientError>) -> Void
    ) {
        do {
            try broadcast.validate()
        } catch {
            completion(.failure(APNsClientError(.invalidRequest, error.description)))
            return
        }
        enqueue(.http(broadcast.wireRequest), timeout: timeout, completion: .answer { completion($0.map(APNsBroadcastResponse.init(answer:))) })
    }
}
