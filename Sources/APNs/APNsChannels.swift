import Foundation
import Logging

/// A broadcast channel's message storage policy, fixed when the channel is created.
public struct APNsChannelStoragePolicy: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The body's `message-storage-policy`.
    public let rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// `0`, No Message Stored: offline devices miss what was sent; a higher publishing budget (for
    /// frequent updates, e.g. scores). Broadcasts on it must have `apns-expiration: 0`.
    public static let noMessageStored = APNsChannelStoragePolicy(rawValue: 0)
    /// `1`, Most Recent Message Stored: APNs keeps the latest update for offline devices, at most
    /// 8 hours (less with `apns-expiration`).
    public static let mostRecentMessageStored = APNsChannelStoragePolicy(rawValue: 1)

    /// The two policies Apple defines.
    public static let allCases: [APNsChannelStoragePolicy] = [.noMessageStored, .mostRecentMessageStored]

    /// `no-message-stored`, `most-recent-message-stored`, or the number.
    public var name: String {
        switch rawValue {
        case 0: "no-message-stored"
        case 1: "most-recent-message-stored"
        default: String(rawValue)
        }
    }

    /// Reads `0`/`1`, `no-message-stored`/`most-recent-message-stored` (also `none`/`most-recent`).
    public init?(name: String) {
        switch name.lowercased() {
        case "0", "no-message-stored", "none": self = .noMessageStored
        case "1", "most-recent-message-stored", "most-recent": self = .mostRecentMessageStored
        default: return nil
        }
    }

    public var description: String { name }
}

/// A channel's configuration as APNs reports it (reading a channel).
public struct APNsChannelConfiguration: Sendable, Equatable {
    public var storagePolicy: APNsChannelStoragePolicy
    /// The body's `push-type`: `LiveActivity`.
    public var pushType: String

    public init(storagePolicy: APNsChannelStoragePolicy, pushType: String = APNsChannelClient.channelPushType) {
        self.storagePolicy = storagePolicy
        self.pushType = pushType
    }
}

extension APNsEndpoint {
    /// `https://api-manage-broadcast.push.apple.com:2196`: channel management, production.
    public static let managementProduction = APNsEndpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
    /// `https://api-manage-broadcast.sandbox.push.apple.com:2195`: channel management, development.
    public static let managementDevelopment = APNsEndpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
}

/// APNs' channel-management API (Apple's "Sending channel management requests to APNs"): create a
/// broadcast channel for an app, read its storage policy, delete it, list the app's channel ids.
///
/// It talks to the management endpoint, a host and port of its own
/// (``APNsEndpoint/managementProduction`` `api-manage-broadcast.push.apple.com:2196`,
/// ``APNsEndpoint/managementDevelopment`` `api-manage-broadcast.sandbox.push.apple.com:2195`, or
/// apns-sandbox, which serves it on its one TLS port), over the same HTTP/2 machinery as
/// ``APNsClient`` (token or certificate auth, a bounded queue, deadlines, backoff). Channels belong
/// to one environment: one made in development does not exist in production. Broadcasts on a channel
/// go to the push endpoint (``APNsBroadcast``, sent by ``APNsClient``).
///
/// ```swift
/// let channels = try APNsChannelClient(
///     configuration: APNsClientConfiguration(endpoint: .managementProduction, credentials: .token(key)), logger: logger)
/// let id = try await channels.create(bundleID: "com.example.app", storagePolicy: .noMessageStored)
/// try await channels.delete(channelID: id, bundleID: "com.example.app")
/// await channels.shutdown()
/// ```
///
/// Every call throws ``APNsChannelError``: APNs' refusal with its status and reason
/// (`ChannelNotRegistered`, `CannotCreateChannelConfig`, …) or why there was no answer.
public final class APNsChannelClient: Sendable {
    /// The body's `push-type` of every channel: the only value Apple allows.
    public static let channelPushType = "LiveActivity"
    /// Bytes of a channel list kept: 10,000 ids (Apple's limit per app and environment) of ~100 bytes.
    static let maximumListBody = 2 * 1024 * 1024

    public let configuration: APNsClientConfiguration
    private let client: APNsClient

    /// Loads the credentials and CA file and starts the connections' threads (see
    /// ``APNsClient/init(configuration:logger:)``); `configuration.endpoint` is the management
    /// endpoint. Management requests are few: one connection is plenty.
    public init(configuration: APNsClientConfiguration, logger: Logger) throws(APNsClientError) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "apns.api"] = "channels"
        client = try APNsClient(configuration: configuration, logger: logger)
    }

    /// Creates a channel for `bundleID` and returns its id (base64; APNs picks it, its length is
    /// not fixed). The storage policy cannot change later.
    ///
    /// `POST /1/apps/<bundle id>/channels` `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`
    /// → 201 with `apns-channel-id`.
    public func create(
        bundleID: String, storagePolicy: APNsChannelStoragePolicy, requestID: UUID? = nil, timeout: Duration? = nil
    ) async throws(APNsChannelError) -> String {
        let context = APNsChannelError.Context(operation: "create a channel", bundleID: bundleID, channelID: nil, requestID: requestID)
        try check(context) { () throws(APNsRequestError) in
            try APNsBroadcast.checkBundleID(bundleID)
            guard APNsChannelStoragePolicy.allCases.contains(storagePolicy) else {
                throw APNsRequestError(
                    field: "message-storage-policy", "must be 0 (No Message Stored) or 1 (Most Recent Message Stored), got \(storagePolicy.rawValue)")
            }
        }
        let body = Array(#"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"\#(Self.channelPushType)"}"#.utf8)
        let answer = try await send(
            APNsHTTPRequest(method: "POST", path: "/1/apps/\(bundleID)/channels", headers: Self.headers(requestID: requestID), body: body),
            context, expecting: [201], timeout: timeout
        )
        guard let channelID = answer.apnsChannelID, !channelID.isEmpty else {
            throw APNsChannelError(unexpected: answer, context, "the 201 carries no apns-channel-id")
        }
        return channelID
    }

    /// Reads a channel's configuration (its storage policy).
    ///
    /// `GET /1/apps/<bundle id>/channels` with `apns-channel-id` → 200 `{"message-storage-policy": …, "push-type": …}`.
    public func read(
        channelID: String, bundleID: String, requestID: UUID? = nil, timeout: Duration? = nil
    ) async throws(APNsChannelError) -> APNsChannelConfiguration {
        let context = APNsChannelError.Context(operation: "read the channel", bundleID: bundleID, channelID: channelID, requestID: requestID)
        try check(context) { () throws(APNsRequestError) in
            try APNsBroadcast.checkBundleID(bundleID)
            try APNsBroadcast.checkChannelID(channelID)
        }
        let answer = try await send(
            APNsHTTPRequest(method: "GET", path: "/1/apps/\(bundleID)/channels", headers: Self.headers(requestID: requestID, channelID: channelID)),
            context, expecting: [200], timeout: timeout
        )
        guard let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any],
            let policy = (object["message-storage-policy"] as? NSNumber)?.intValue
        else {
            throw APNsChannelError(unexpected: answer, context, "the body is not {\"message-storage-policy\": …}")
        }
        return APNsChannelConfiguration(
            storagePolicy: APNsChannelStoragePolicy(rawValue: policy), pushType: object["push-type"] as? String ?? Self.channelPushType)
    }

    /// Deletes a channel. Irreversible: its id is never given out again, and APNs may still deliver
    /// messages it stored for it.
    ///
    /// `DELETE /1/apps/<bundle id>/channels` with `apns-channel-id` → 204.
    public func delete(channelID: String, bundleID: String, requestID: UUID? = nil, timeout: Duration? = nil) async throws(APNsChannelError) {
        let context = APNsChannelError.Context(operation: "delete the channel", bundleID: bundleID, channelID: channelID, requestID: requestID)
        try check(context) { () throws(APNsRequestError) in
            try APNsBroadcast.checkBundleID(bundleID)
            try APNsBroadcast.checkChannelID(channelID)
        }
        _ = try await send(
            APNsHTTPRequest(
                method: "DELETE", path: "/1/apps/\(bundleID)/channels", headers: Self.headers(requestID: requestID, channelID: channelID)),
            context, expecting: [204, 200], timeout: timeout
        )
    }

    /// The ids of every channel the app has in this environment.
    ///
    /// `GET /1/apps/<bundle id>/all-channels` → 200 `{"channels": [<id>, …]}`.
    public func list(bundleID: String, requestID: UUID? = nil, timeout: Duration? = nil) async throws(APNsChannelError) -> [String] {
        let context = APNsChannelError.Context(operation: "list the channels", bundleID: bundleID, channelID: nil, requestID: requestID)
        try check(context) { () throws(APNsRequestError) in try APNsBroadcast.checkBundleID(bundleID) }
        let answer = try await send(
            APNsHTTPRequest(
                method: "GET", path: "/1/apps/\(bundleID)/all-channels", headers: Self.headers(requestID: requestID),
                maximumAnswerBody: Self.maximumListBody),
            context, expecting: [200], timeout: timeout
        )
        // Apple's page says the 200's body is empty and, in the next table, that it holds `channels`:
        // an empty body is read as no channels.
        if answer.body.isEmpty { return [] }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any],
            let channels = object["channels"] as? [String]
        else {
            throw APNsChannelError(unexpected: answer, context, "the body is not {\"channels\": [...]}")
        }
        return channels
    }

    /// Fails queued requests, lets in-flight ones finish and closes the connections (see
    /// ``APNsClient/shutdown()``).
    public func shutdown() async {
        await client.shutdown()
    }

    // MARK: Requests

    private static func headers(requestID: UUID?, channelID: String? = nil) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        if let channelID { headers.append(("apns-channel-id", channelID)) }
        if let requestID { headers.append(("apns-request-id", requestID.uuidString.lowercased())) }
        return headers
    }

    private func check(_ context: APNsChannelError.Context, _ rules: () throws(APNsRequestError) -> Void) throws(APNsChannelError) {
        do {
            try rules()
        } catch {
            throw APNsChannelError(notSent: APNsClientError(.invalidRequest, error.description), context)
        }
    }

    /// Sends and returns an answer with one of the `expected` statuses; any other is APNs' refusal.
    private func send(
        _ request: APNsHTTPRequest, _ context: APNsChannelError.Context, expecting expected: Set<Int>, timeout: Duration?
    ) async throws(APNsChannelError) -> APNsAnswer {
        let answer: APNsAnswer
        do {
            answer = try await client.send(request, timeout: timeout)
        } catch {
            throw APNsChannelError(notSent: error, context)
        }
        guard expected.contains(answer.status) else {
            guard let reason = answer.reason else {
                throw APNsChannelError(unexpected: answer, context, "status \(answer.status) without a reason")
            }
            throw APNsChannelError(refused: answer, reason: reason, context)
        }
        return answer
    }
}

/// Why a channel request failed: APNs refused it (status and reason, as Apple documents them), or
/// there was no usable answer (the ``APNsClientError``, including `invalidRequest` for a request
/// refused before sending).
///
/// Its description names the reason and what it means for this request, e.g.
/// `ChannelNotRegistered (400): no channel 'dHN0…' for com.example.app (apns-request-id …)`.
public struct APNsChannelError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Kind: Sendable, Equatable {
        case refused(status: Int, reason: APNsReason)
        case notSent(APNsClientError)
        case unexpectedAnswer(status: Int)
    }

    /// What the request was about, for the message.
    struct Context {
        var operation: String
        var bundleID: String
        var channelID: String?
        var requestID: UUID?
    }

    private let kind: Kind
    /// What went wrong, in words.
    public let message: String
    /// `apns-request-id`: APNs' (or the one sent) when there was an answer, else the one sent.
    public let requestID: String?

    init(refused answer: APNsAnswer, reason: APNsReason, _ context: Context) {
        kind = .refused(status: answer.status, reason: reason)
        requestID = answer.apnsRequestID ?? context.requestID?.uuidString.lowercased()
        message = Self.explain(reason, context)
    }

    init(notSent error: APNsClientError, _ context: Context) {
        kind = .notSent(error)
        requestID = context.requestID?.uuidString.lowercased()
        message = error.code == .invalidRequest ? "cannot \(context.operation): \(error.message)" : "no answer to \(context.operation): \(error)"
    }

    init(unexpected answer: APNsAnswer, _ context: Context, _ what: String) {
        kind = .unexpectedAnswer(status: answer.status)
        requestID = answer.apnsRequestID ?? context.requestID?.uuidString.lowercased()
        message = "unexpected answer to \(context.operation) for \(context.bundleID): \(what)"
    }

    /// The HTTP status of APNs' answer; nil when there was none.
    public var status: Int? {
        switch kind {
        case .refused(let status, _), .unexpectedAnswer(let status): status
        case .notSent: nil
        }
    }

    /// APNs' reason, when it refused the request.
    public var reason: APNsReason? {
        if case .refused(_, let reason) = kind { return reason }
        return nil
    }

    /// Why there was no answer (`invalidRequest` when the request was refused before sending).
    public var clientError: APNsClientError? {
        if case .notSent(let error) = kind { return error }
        return nil
    }

    /// Whether the same request later can succeed (429, 5xx, a transport failure).
    public var isRetryable: Bool {
        switch kind {
        case .refused(let status, let reason): APNsBroadcastOutcome(status: status, reason: reason).isRetryable
        case .notSent(let error): error.isRetryable
        case .unexpectedAnswer: false
        }
    }

    public var description: String {
        var text: String
        switch kind {
        case .refused(let status, let reason): text = "\(reason) (\(status)): \(message)"
        case .notSent, .unexpectedAnswer: text = message
        }
        if let requestID { text += " (apns-request-id \(requestID))" }
        return text
    }

    /// What a refusal means for this request.
    private static func explain(_ reason: APNsReason, _ context: Context) -> String {
        let app = context.bundleID
        let channel = context.channelID.map { "'\($0)'" } ?? "the channel"
        switch reason.canonical {
        case .channelNotRegistered: return "no channel \(channel) for \(app)"
        case .badChannelId: return "\(channel) is not a valid channel id"
        case .missingChannelId: return "the request named no channel"
        case .cannotCreateChannelConfig: return "\(app) has reached its channel limit (10,000 per environment); delete channels it no longer uses"
        case .featureNotEnabled: return "broadcast is not enabled for \(app): enable the Broadcast capability of its App ID on developer.apple.com"
        case .topicDisallowed: return "'\(app)' is not allowed: give the bare bundle id, without a push-type suffix"
        case .topicMismatch: return "the token's or certificate's bundle ids do not include \(app)"
        case .badRequestParams: return "APNs did not recognise an attribute of the body of the request to \(context.operation)"
        case .badRequestPayload: return "APNs could not parse the body of the request to \(context.operation)"
        case .missingPushType, .invalidPushType: return "the push type must be LiveActivity"
        case .badMessageId: return "apns-request-id is not a canonical UUID"
        case .badPath: return "the path is not a channel-management path (is the endpoint the management one?)"
        case .methodNotAllowed: return "the method is not allowed on this path"
        default: return "APNs refused to \(context.operation) for \(app)"
        }
    }
}
