import Foundation

/// A request other than a device notification as it goes on the wire: broadcasts
/// (``APNsBroadcast``) and channel management (``APNsChannelClient``). They share the client's
/// connections, queue, deadlines, provider token and resends with notifications; only what is
/// written and what is read differ.
struct APNsHTTPRequest: Sendable {
    var method: String
    var path: String
    /// Regular headers, without `authorization` (the connection adds the provider token) and without
    /// `content-type`/`content-length` (added for a body).
    var headers: [(name: String, value: String)]
    /// Empty: no DATA frame (GET, DELETE).
    var body: [UInt8]
    /// Bytes of the answer's body kept (a list of 10,000 channel ids is far longer than a refusal).
    var maximumAnswerBody: Int

    /// Answers to notifications and broadcasts are empty or a `{"reason":…}`: this is plenty.
    static let defaultMaximumAnswerBody = 64 * 1024

    init(
        method: String, path: String, headers: [(name: String, value: String)], body: [UInt8] = [], maximumAnswerBody: Int = defaultMaximumAnswerBody
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.maximumAnswerBody = maximumAnswerBody
    }

    /// The request headers, in the order they are sent (pseudo-headers first).
    /// Headers whose values change from request to request: sent without entering the HPACK table
    /// (Apple asks this of `apns-id`, `apns-expiration` and `apns-collapse-id`; a request id is alike).
    static let unindexedHeaderNames: Set<String> = ["apns-id", "apns-expiration", "apns-collapse-id", "apns-request-id"]

    func headerFields(authority: String, authorization: String?) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            (":method", method),
            (":scheme", "https"),
            (":authority", authority),
            (":path", path),
        ]
        if let authorization { fields.append(("authorization", authorization)) }
        fields += headers
        if !body.isEmpty {
            fields.append(("content-type", "application/json"))
            fields.append(("content-length", String(body.count)))
        }
        return fields
    }
}

/// Everything an answer carried that one kind of request or another reads.
struct APNsAnswer: Sendable {
    var status: Int
    var apnsID: String?
    var apnsUniqueID: String?
    /// `apns-request-id`: broadcasts and channel management name requests by it.
    var apnsRequestID: String?
    /// `apns-channel-id`: the new channel's id in a 201 to a channel creation.
    var apnsChannelID: String?
    var body: [UInt8]
    /// From the stream's opening to the answer.
    var roundTrip: Duration?

    /// The `reason` of a refusal (nil for a 2xx); a body that is not the documented JSON is kept as
    /// its text, as ``APNsResponse`` does.
    var reason: APNsReason? {
        guard !(200..<300).contains(status) else { return nil }
        return APNsResponse(status: status, apnsID: nil, apnsUniqueID: nil, body: body).reason
    }
}

extension APNsResponse {
    /// A notification's answer.
    init(answer: APNsAnswer) {
        self.init(status: answer.status, apnsID: answer.apnsID, apnsUniqueID: answer.apnsUniqueID, body: answer.body)
        roundTrip = answer.roundTrip
    }
}
