/// An answer to one stream.
struct PushAnswer {
    var status: Int
    /// Echoed from the request when it sent a valid one, else made up.
    var apnsID: String
    /// For 200s: the id of this delivery in the (imaginary) delivery log.
    var uniqueID: String?
    /// Empty for 200; `{"reason":…}` otherwise.
    var body: [UInt8]
    /// The header `apnsID` goes in: `apns-id` for notifications, `apns-request-id` for broadcasts
    /// and channel management.
    var idHeader = "apns-id"
    /// `apns-channel-id` of a 201 to a channel creation.
    var channelID: String?

    /// A 200 to a notification: a delivery the client may send again if it never sees this answer.
    var acceptsNotification: Bool { status == 200 && idHeader == "apns-id" }
}
