import Foundation
import TestSupport
import Testing

@testable import PushCore

/// The fast reader behind `DeviceRegistration.decode(body:)`: it answers only where it agrees with
/// JSONSerialization, and leaves everything else (errors included) to it.
@Suite struct JSONObjectReaderTests {
    /// Bodies the reader takes: the result must be what JSONSerialization gives, field by field.
    static let accepted = [
        #"{}"#,
        #" { "user" : "alice" , "topics" : [ "news" , "sports" ] } "#,
        #"{"user": null, "locale": "de-CH", "settings": {"alert": true, "badge": false, "sound": null}}"#,
        #"{"user": "caf\u00e9 \"quoted\" back\\slash \/ tab\t nl\n", "device": {"name": "Zoë’s iPhone 📱"}}"#,
        #"{"user": "pair \ud83d\ude00 end", "topics": [], "device": {}}"#,
        "{\"user\":\"\u{00e9}\u{1F600}\",\n\t\"environment\":\"sandbox\"}\r\n",
        #"{"nested": {"a": [[], [{}], [true, false, null]]}}"#,
    ]

    /// Bodies the reader leaves to JSONSerialization: invalid JSON, and valid JSON it does not handle.
    static let declined = [
        "", " ", "null", "[1, 2]", #""text""#, "{", #"{"user": "alice""#, #"{"user": "alice",}"#, #"{"user" "alice"}"#,
        #"{"user": 'alice'}"#, #"{user: "alice"}"#, #"{"n": 1}"#, #"{"n": -0.5e3}"#, #"{"a": tru}"#, #"{"a": nulls}"#,
        #"{"a": "x"} trailing"#, #"{"a": "\x"}"#, #"{"a": "\u12"}"#, #"{"a": "\ud800"}"#, #"{"a": "\udc00\ud800"}"#,
        "{\"a\": \"raw\ncontrol\"}", #"{"a": "x", "a": "y"}"#, "\u{FEFF}{}",
        String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
    ]

    @Test(arguments: accepted)
    func acceptedBodiesMatchJSONSerialization(_ text: String) throws {
        let fast = try #require(JSONObjectReader.object(Array(text.utf8)), "declined \(text)")
        let reference = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(Self.same(fast, reference), "\(fast) vs \(reference)")
    }

    @Test(arguments: declined)
    func otherBodiesAreLeftToJSONSerialization(_ text: String) {
        #expect(JSONObjectReader.object(Array(text.utf8)) == nil, "\(text)")
    }

    @Test func invalidUTF8IsDeclined() {
        #expect(JSONObjectReader.object(Array(#"{"user": ""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)) == nil)
        #expect(JSONObjectReader.object(Array(#"{"user": "\n"#.utf8) + [0xFF] + Array(#""}"#.utf8)) == nil)
    }

    /// Deep equality over JSON values, telling booleans from numbers.
    static func same(_ a: Any, _ b: Any) -> Bool {
        switch (a, b) {
        case (let a as [String: Any], let b as [String: Any]):
            return a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
        case (let a as [Any], let b as [Any]):
            return a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
        case (let a as String, let b as String):
            return a == b
        case (is NSNull, is NSNull):
            return true
        default:
            guard let a = JSONKind.boolean(a), let b = JSONKind.boolean(b) else { return false }
            return a == b
        }
    }
}

@Suite struct JSONObjectReaderIntegerTests {
    @Test func plainIntegersAreReadWhenAskedFor() throws {
        let object = try #require(
            JSONObjectReader.object(Array(#"{"a": 0, "b": -12, "c": 9223372036854775807, "d": -9223372036854775808}"#.utf8), integers: true))
        #expect(object["a"] as? Int64 == 0)
        #expect(object["b"] as? Int64 == -12)
        #expect(object["c"] as? Int64 == .max)
        #expect(object["d"] as? Int64 == .min)
        #expect(JSONObjectReader.object(Array(#"{"a": 1}"#.utf8)) == nil, "not without integers")
    }

    @Test(arguments: ["1.5", "1e3", "1E3", "01", "-", "-01", "9223372036854775808", "-9223372036854775809", "1.", "--1"])
    func otherNumbersAreDeclined(_ number: String) {
        #expect(JSONObjectReader.object(Array(#"{"a": \#(number)}"#.utf8), integers: true) == nil, "\(number)")
    }

    @Test func aFeedbackEventTakesTheQuickPathOnlyWithExactTypes() throws {
        let hex = String(repeating: "a1", count: 32)
        let event = InvalidTokenReport.quickEvent(
            Array(#"{"app":"a","token":"\#(hex)","reason":"Unregistered","timestamp":null,"reported_at":5,"extra":[1.5]}"#.utf8))
        #expect(event == nil, "a fraction anywhere sends the body to JSONDecoder")
        let plain = InvalidTokenReport.quickEvent(
            Array(#"{"app":"a","token":"\#(hex)","reason":"Unregistered","timestamp":null,"reported_at":5,"extra":"x"}"#.utf8))
        #expect(plain == FeedbackEvent(app: "a", token: hex, reason: "Unregistered", timestamp: nil, reportedAt: 5))
        #expect(
            InvalidTokenReport.quickEvent(Array(#"{"app":"a","token":"\#(hex)","reason":"Unregistered","timestamp":"7","reported_at":5}"#.utf8))
                == nil)
        #expect(InvalidTokenReport.quickEvent(Array(#"{"app":"a","token":"\#(hex)","reason":"Unregistered"}"#.utf8)) == nil)
    }
}

/// Differential fuzzing: registration-like bodies with random edits. Whenever the fast reader answers,
/// JSONSerialization must accept the body and give the same object.
@Suite struct JSONObjectReaderFuzzTests {
    @Test func wheneverTheReaderAnswersJSONSerializationAgrees() throws {
        var generator = SplitMix64(seed: 0x0B0D_1E5)
        let seeds =
            JSONObjectReaderTests.accepted + [
                #"{"user": "alice", "locale": "zh-Hant-TW", "environment": "sandbox", "topics": ["news"], "device": {"uuid": "U-1", "name": "Zoë"}, "settings": {"alert": true, "badge": false}}"#
            ]
        let alphabet = Array(#"{}[]":,\ nulltruefalse0123456789-.eEu"\/bfnrt"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF, 0xED, 0xA0, 0x80]
        var answered = 0
        for round in 0..<4000 {
            var bytes = Array(seeds[Int(generator.next() % UInt64(seeds.count))].utf8)
            for _ in 0..<Int(generator.next() % 4) + 1 {
                let position = Int(generator.next() % UInt64(bytes.count + 1))
                switch generator.next() % 3 {
                case 0: bytes.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: position)
                case 1: if position < bytes.count { bytes.remove(at: position) }
                default: if position < bytes.count { bytes[position] = alphabet[Int(generator.next() % UInt64(alphabet.count))] }
                }
            }
            guard let fast = JSONObjectReader.object(bytes) else { continue }
            answered += 1
            let reference = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
            #expect(reference.map { JSONObjectReaderTests.same(fast, $0) } == true, "round \(round): \(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(answered > 100, "the edits leave enough valid bodies to compare (\(answered))")
    }
}
