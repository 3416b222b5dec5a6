import Foundation
import HTTP2Transport
import PushCore
import Testing

@testable import APNs

/// The header block a connection sends holds exactly ``APNsNotification/headers(authority:authorization:)``.
@Suite struct APNsNotificationHTTP2Tests {
    static let token = String(repeating: "ab", count: 32)

    static let notifications: [APNsNotification] = [
        APNsNotification(deviceToken: token, topic: "com.example.app", payload: Array(#"{"aps":{}}"#.utf8)),
        APNsNotification(
            deviceToken: token, topic: "com.example.app", pushType: .background, priority: .conserveEnergy,
            expiration: 1_767_225_600, collapseID: "order-4711", apnsID: UUID(uuidString: "123E4567-E89B-12D3-A456-426614174000")!,
            payload: Array(repeating: UInt8(ascii: "x"), count: 4096)
        ),
        APNsNotification(deviceToken: token, topic: "com.example.app.voip", pushType: .voip, priority: .low, expiration: 0, payload: [1]),
    ]

    @Test func blockHoldsTheHeadersInOrder() {
        for notification in Self.notifications {
            for authorization in [nil, "bearer x.y.z"] { check(notification, authorization: authorization) }
        }
    }

    func check(_ notification: APNsNotification, authorization: String?) {
        var block = HTTP2HeaderBlock()
        // A refilled block holds only the new request's fields.
        block.add("stale", "field")
        block.removeAll()
        notification.addHeaders(to: &block, authority: "api.push.apple.com", authorization: authorization)
        let expected = notification.headers(authority: "api.push.apple.com", authorization: authorization)
        #expect(block.fields.map(\.name) == expected.map(\.name))
        #expect(block.fields.map(\.value) == expected.map(\.value))
        // Per-request values never enter the HPACK table; every other field may.
        let perRequest: Set<String> = ["apns-id", "apns-expiration", "apns-collapse-id"]
        #expect(block.unindexedNames == expected.map(\.name).filter { perRequest.contains($0) })
    }
}
