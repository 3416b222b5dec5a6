import Foundation
import Testing

@testable import APNsSandbox

@Suite("JSONObjectSyntax: strict JSON object check for payloads")
struct JSONObjectSyntaxTests {
    static func check(_ text: String) -> Bool { JSONObjectSyntax.isObject(Array(text.utf8)) }

    @Test(arguments: [
        "{}", " { } ", #"{"aps":{"alert":"hi","badge":5,"sound":"bingbong.aiff"},"custom":["bang",1,-2.5e3,true,false,null]}"#,
        #"{"a":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}"#, "{\"é\":\"日本語 😀\"}", #"{"n":[0,-0,0.5,1E+2,1e-2,123456789012345678901234567890]}"#,
        "\n\t{\"a\":{}}\r\n",
    ])
    func acceptsValidObjects(_ text: String) {
        #expect(Self.check(text))
        // Agrees with Foundation's parser on what is valid.
        #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8))) is [String: Any])
    }

    @Test(arguments: [
        "", " ", "[]", "\"s\"", "1", "null", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}", "{\"a\":1 \"b\":2}", "{a:1}",
        "{'a':1}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":-}", "{\"a\":+1}", "{\"a\":tru}", "{\"a\":nul}",
        "{\"a\":\"\u{1}\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u12G4\"}", "{\"a\":\"unterminated}", "{} {}", "{}x",
        "{\"a\":[1,2}", "{\"a\":[1,]}", "{\"a\":NaN}", "{\"a\":Infinity}", "{/*c*/}",
    ])
    func refusesInvalidText(_ text: String) {
        #expect(!Self.check(text))
    }

    @Test func refusesInvalidUTF8() {
        let bad: [[UInt8]] = [
            [0xFF], [0xC0, 0x80], [0xC2], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF0, 0x80, 0x80, 0x80],
            [0x80], [0xE2, 0x82],
        ]
        for sequence in bad {
            let bytes = Array(#"{"a":""#.utf8) + sequence + Array(#""}"#.utf8)
            #expect(!JSONObjectSyntax.isObject(bytes), "\(sequence)")
        }
        let good: [[UInt8]] = [[0xC2, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xED, 0x9F, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF]]
        for sequence in good {
            let bytes = Array(#"{"a":""#.utf8) + sequence + Array(#""}"#.utf8)
            #expect(JSONObjectSyntax.isObject(bytes), "\(sequence)")
        }
    }

    @Test func boundsNesting() {
        let deep = { (depth: Int) in String(repeating: "{\"a\":", count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1) }
        #expect(Self.check(deep(JSONObjectSyntax.maximumDepth)))
        #expect(!Self.check(deep(JSONObjectSyntax.maximumDepth + 1)))
        #expect(!Self.check(String(repeating: "[", count: 100_000)))
    }
}
