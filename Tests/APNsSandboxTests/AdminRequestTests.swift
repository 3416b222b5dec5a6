import APNs
import Foundation
import Testing

@testable import APNsSandbox

@Suite("Admin API: request parsing and JSON answers")
struct AdminRequestTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    static func field(of body: () throws(AdminRequestError) -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return error.field
        }
    }

    @Test func tokenStates() throws {
        #expect(
            try AdminRequest.tokenState(from: Self.bytes(#"{"state":"unregistered","timestamp":1700000000000}"#))
                == .unregistered(timestamp: 1_700_000_000_000))
        #expect(
            try AdminRequest.tokenState(from: Self.bytes(#"{"state":"expired","timestamp":1700000000000}"#))
                == .expired(timestamp: 1_700_000_000_000))
        #expect(try AdminRequest.tokenState(from: Self.bytes(#"{"state":"bad"}"#)) == .bad)
        #expect(try AdminRequest.tokenState(from: Self.bytes(#"{"state":"liveactivity"}"#)) == .liveActivity)
        #expect(try AdminRequest.tokenState(from: Self.bytes(#"{"state":"active"}"#)) == nil)
        let cases: [(String, String)] = [
            ("nope", "body"), ("[]", "body"), (#"{}"#, "state"), (#"{"state":"gone"}"#, "state"), (#"{"state":1}"#, "state"),
            (#"{"state":"unregistered"}"#, "timestamp"), (#"{"state":"unregistered","timestamp":"soon"}"#, "timestamp"),
            (#"{"state":"unregistered","timestamp":-1}"#, "timestamp"), (#"{"state":"unregistered","timestamp":1.5}"#, "timestamp"),
            (#"{"state":"bad","timestamp":1}"#, "timestamp"), (#"{"state":"bad","extra":1}"#, "extra"),
            (#"{"state":"expired"}"#, "timestamp"),
        ]
        for (body, field) in cases {
            #expect(Self.field { () throws(AdminRequestError) in _ = try AdminRequest.tokenState(from: Self.bytes(body)) } == field, "\(body)")
        }
    }

    @Test func faultsMerge() throws {
        var faults = SandboxFaults()
        try AdminRequest.applyFault(from: Self.bytes(#"{"status":503,"rate":0.1}"#), to: &faults)
        try AdminRequest.applyFault(from: Self.bytes(#"{"status":429,"rate":0.05}"#), to: &faults)
        try AdminRequest.applyFault(from: Self.bytes(#"{"goaway_every":10000}"#), to: &faults)
        try AdminRequest.applyFault(from: Self.bytes(#"{"delay_ms":5,"drop_every":100}"#), to: &faults)
        #expect(faults.statusRates == [.init(status: 429, rate: 0.05), .init(status: 503, rate: 0.1)])
        #expect(faults.goawayEvery == 10000)
        #expect(faults.delayMilliseconds == 5)
        #expect(faults.dropEvery == 100)
        try AdminRequest.applyFault(from: Self.bytes(#"{"status":503,"rate":0}"#), to: &faults)
        try AdminRequest.applyFault(from: Self.bytes(#"{"goaway_every":0,"delay_ms":null}"#), to: &faults)
        #expect(faults.statusRates == [.init(status: 429, rate: 0.05)])
        #expect(faults.goawayEvery == nil)
        #expect(faults.delayMilliseconds == nil)
        let json = try JSONSerialization.jsonObject(with: Data(AdminJSON.faults(faults))) as? [String: Any]
        #expect((json?["faults"] as? [Any])?.count == 2)
    }

    /// The 503 reason and the GOAWAY reason are chosen; both read back in the shape they were given.
    @Test func faultsChooseTheReasonsAPNsGives() throws {
        var faults = SandboxFaults()
        try AdminRequest.applyFault(from: Self.bytes(#"{"status":503,"rate":0.2,"reason":"Shutdown"}"#), to: &faults)
        try AdminRequest.applyFault(from: Self.bytes(#"{"status":429,"rate":0.1,"reason":"TooManyProviderTokenUpdates"}"#), to: &faults)
        try AdminRequest.applyFault(from: Self.bytes(#"{"goaway_every":5,"goaway_reason":"InvalidProviderToken"}"#), to: &faults)
        #expect(faults.injectedRejection(roll: 0.05) == PushRejection(429, .tooManyProviderTokenUpdates))
        #expect(faults.injectedRejection(roll: 0.15) == PushRejection(503, .shutdown))
        #expect(faults.goawayReason == .invalidProviderToken)
        let json = String(decoding: AdminJSON.faults(faults), as: UTF8.self)
        #expect(json.contains(#""reason":"Shutdown""#) && json.contains(#""goaway_reason":"InvalidProviderToken""#), "\(json)")
        try AdminRequest.applyFault(from: Self.bytes(#"{"status":503,"rate":0.2}"#), to: &faults)
        #expect(faults.injectedRejection(roll: 0.15) == PushRejection(503, .serviceUnavailable), "the default again")
        try AdminRequest.applyFault(from: Self.bytes(#"{"goaway_reason":null}"#), to: &faults)
        #expect(faults.goawayReason == nil && faults.goawayEvery == 5)
    }

    @Test func badFaultsNameTheFieldAndChangeNothing() {
        let cases: [(String, String)] = [
            ("x", "body"), ("{}", "body"), (#"{"status":404,"rate":0.1}"#, "status"), (#"{"rate":0.1}"#, "status"),
            (#"{"status":503}"#, "rate"), (#"{"status":503,"rate":1.5}"#, "rate"), (#"{"status":503,"rate":"half"}"#, "rate"),
            (#"{"status":503,"rate":true}"#, "rate"), (#"{"goaway_every":-1}"#, "goaway_every"), (#"{"goaway_every":2.5}"#, "goaway_every"),
            (#"{"delay_ms":600000}"#, "delay_ms"), (#"{"drop_every":"often"}"#, "drop_every"), (#"{"latency":5}"#, "latency"),
            (#"{"delay_ms":5,"goaway_every":-3}"#, "goaway_every"),
            (#"{"status":503,"rate":0.1,"reason":"TooManyRequests"}"#, "reason"), (#"{"reason":"Shutdown"}"#, "reason"),
            (#"{"goaway_every":3,"goaway_reason":"Nope"}"#, "goaway_reason"), (#"{"goaway_reason":5}"#, "goaway_reason"),
        ]
        for (body, field) in cases {
            var faults = SandboxFaults()
            #expect(
                Self.field { () throws(AdminRequestError) in try AdminRequest.applyFault(from: Self.bytes(body), to: &faults) } == field, "\(body)")
            #expect(faults.isEmpty, "\(body)")
        }
    }

    @Test func queryIntegers() throws {
        #expect(try AdminRequest.queryInteger(nil, field: "since") == nil)
        #expect(try AdminRequest.queryInteger("123", field: "since") == 123)
        #expect(Self.field { () throws(AdminRequestError) in _ = try AdminRequest.queryInteger("yesterday", field: "since") } == "since")
        #expect(Self.field { () throws(AdminRequestError) in _ = try AdminRequest.queryInteger("-5", field: "limit") } == "limit")
    }

    @Test func deliveriesJSONParsesBack() throws {
        let delivery = RecordedDelivery(
            token: "aa",
            topic: "com.example.app",
            headers: [PushRequest.Field("apns-topic", "com.example.app"), PushRequest.Field("x-odd", "quote\" back\\slash\u{1}")],
            payload: Array(#"{"aps":{"alert":"héllo"},"n":[1,2]}"#.utf8),
            receivedAt: 1234
        )
        let object = try JSONSerialization.jsonObject(with: Data(AdminJSON.deliveries([delivery, delivery]))) as? [String: Any]
        let deliveries = try #require(object?["deliveries"] as? [[String: Any]])
        #expect(deliveries.count == 2)
        #expect(deliveries[0]["token"] as? String == "aa")
        #expect(deliveries[0]["topic"] as? String == "com.example.app")
        #expect((deliveries[0]["headers"] as? [String: String])?["x-odd"] == "quote\" back\\slash\u{1}")
        #expect(((deliveries[0]["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String == "héllo")
        #expect((deliveries[0]["received_at"] as? NSNumber)?.int64Value == 1234)
        #expect(String(decoding: AdminJSON.deliveries([]), as: UTF8.self) == #"{"deliveries":[]}"#)
    }

    @Test func statisticsJSON() throws {
        var statistics = SandboxStatistics()
        statistics.requests = 3
        statistics.byStatus = [200: 2, 410: 1]
        statistics.byReason = ["Unregistered": 1]
        statistics.recorded = 2
        let object = try JSONSerialization.jsonObject(with: Data(AdminJSON.statistics(statistics))) as? [String: Any]
        #expect((object?["requests"] as? NSNumber)?.intValue == 3)
        #expect((object?["delivered"] as? NSNumber)?.intValue == 2)
        #expect(((object?["by_status"] as? [String: Any])?["410"] as? NSNumber)?.intValue == 1)
        #expect(((object?["by_reason"] as? [String: Any])?["Unregistered"] as? NSNumber)?.intValue == 1)
    }
}
