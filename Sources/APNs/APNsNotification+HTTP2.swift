import Foundation
import HTTP2Transport
import PushCore

extension APNsNotification {
    /// ``headers(authority:authorization:)`` written straight into `block`: the same fields in the
    /// same order, without an array of strings, an interpolated path or formatted numbers per request.
    /// ``ClientConnection`` refills one block per connection for every request it sends.
    func addHeaders(to block: inout HTTP2HeaderBlock, authority: String, authorization: String?) {
        block.add(":method", "POST")
        block.add(":scheme", "https")
        block.add(":authority", authority)
        block.add(":path", "/3/device/", deviceToken)
        block.add("apns-topic", topic)
        block.add("apns-push-type", pushType.rawValue)
        block.add("apns-priority", decimal: priority.rawValue)
        if let authorization { block.add("authorization", authorization) }
        // Values that change from request to request stay out of the HPACK table, as Apple asks.
        if let expiration { block.add("apns-expiration", decimal: Int(expiration), indexed: false) }
        if let collapseID { block.add("apns-collapse-id", collapseID, indexed: false) }
        if let apnsID { block.add("apns-id", apnsID.uuidString.lowercased(), indexed: false) }
        block.add("content-type", "application/json")
        block.add("content-length", decimal: payload.count)
    }
}
