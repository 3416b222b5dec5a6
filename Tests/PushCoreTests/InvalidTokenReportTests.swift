import Testing

@testable import PushCore

@Suite struct InvalidTokenReportTests {
    let hex = String(repeating: "a1", count: 32)

    func body(_ json: String) -> [UInt8] { Array(json.utf8) }

    @Test func aValidEventUsesAPNsTimestampElseTheReportTime() throws {
        let withTimestamp = try InvalidTokenReport(
            feedbackBody: body(
                #"{"app":"com.example.game","token":"\#(hex.uppercased())","reason":"Unregistered","timestamp":1767225000123,"reported_at":1767225000456}"#
            ))
        #expect(
            withTimestamp
                == InvalidTokenReport(
                    app: "com.example.game", token: try DeviceToken(normalizing: hex), reason: "Unregistered", invalidSince: 1_767_225_000_123))
        let without = try InvalidTokenReport(
            feedbackBody: body(#"{"app":"com.example.game","token":"\#(hex)","reason":"BadDeviceToken","reported_at":42}"#))
        #expect(without.invalidSince == 42)
        #expect(without.reason == "BadDeviceToken")
    }

    @Test func badEventsNameTheField() {
        let cases: [(String, FeedbackError.Code, String)] = [
            ("[1]", .invalidJSON, "body"),
            ("{", .invalidJSON, "body"),
            (#"{"token":"\#(hex)","reason":"Unregistered","reported_at":1}"#, .missingField, "app"),
            (#"{"app":"","token":"\#(hex)","reason":"Unregistered","reported_at":1}"#, .invalidField, "app"),
            (#"{"app":"a","token":7,"reason":"Unregistered","reported_at":1}"#, .invalidField, "token"),
            (#"{"app":"a","token":"abc","reason":"Unregistered","reported_at":1}"#, .invalidField, "token"),
            (#"{"app":"a","token":"\#(hex)","reason":"TooManyRequests","reported_at":1}"#, .invalidField, "reason"),
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered"}"#, .missingField, "reported_at"),
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":1,"timestamp":-5}"#, .invalidField, "timestamp"),
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":1.5}"#, .invalidField, "reported_at"),
            // Hostile-input catalogue (tests/system/test_hostile.py): numbers past a Double are still named, and
            // JSON that different readers read differently is refused.
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":1,"timestamp":1e400}"#, .invalidField, "timestamp"),
            (
                #"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":1\#(String(repeating: "0", count: 400))}"#, .invalidField,
                "reported_at"
            ),
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":9223372036854775808}"#, .invalidField, "reported_at"),
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":null}"#, .invalidField, "reported_at"),
            (#"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":"1"}"#, .invalidField, "reported_at"),
            (
                #"{"app":"a","token":"\#(hex)","token":"\#(String(repeating: "b2", count: 32))","reason":"Unregistered","reported_at":1}"#,
                .invalidJSON, "body"
            ),
            ("\u{FEFF}" + #"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":1}"#, .invalidJSON, "body"),
            (
                #"{"app":"a","token":"\#(hex)","reason":"Unregistered","reported_at":1,"x":\#(String(repeating: "[", count: 100_000))"#, .invalidJSON,
                "body"
            ),
        ]
        for (json, code, field) in cases {
            do {
                _ = try InvalidTokenReport(feedbackBody: body(json))
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.code == code, "\(json): \(error)")
                #expect(error.field == field, "\(json): \(error)")
                #expect(error.message.hasPrefix("\(field): "))
            }
        }
    }
}
