import Foundation
import PushCore
import Testing

@Suite("Payload rendering: device settings, size limits, truncation, batch encoding")
struct RenderingRulesTests {
    @Test func disabledPartsAreLeftOut() throws {
        let payload = #"{"aps": {"alert": "Hello", "badge": 3, "sound": "default", "thread-id": "t"}, "x": 1}"#
        let noSound = try rendered(payload, settings: NotificationSettings(alert: true, badge: true, sound: false))
        #expect(noSound.payloadString == #"{"aps":{"alert":"Hello","badge":3,"thread-id":"t"},"x":1}"#)
        let badgeOnly = try rendered(payload, settings: NotificationSettings(alert: false, badge: true, sound: false))
        #expect(badgeOnly.payloadString == #"{"aps":{"badge":3,"thread-id":"t"},"x":1}"#)
        #expect(badgeOnly.pushType == .alert)
    }

    @Test func aDeviceLeftWithNothingIsSkippedOrBecomesBackground() throws {
        let request = try decodeRequest(requestBody(payload: #"{"aps": {"alert": "Hello", "sound": "default"}}"#))
        let renderer = NotificationRenderer(request: request, catalogs: .empty)
        #expect(try renderer.render(locale: nil, settings: NotificationSettings(alert: false, badge: true, sound: false)) == .skipped(.nothingToShow))

        let withContent = try rendered(
            #"{"aps": {"alert": "Hello", "content-available": 1}, "sync": true}"#,
            settings: NotificationSettings(alert: false, badge: false, sound: false))
        #expect(withContent.payloadString == #"{"aps":{"content-available":1},"sync":true}"#)
        #expect(withContent.pushType == .background)
        #expect(withContent.priority == 5)
    }

    @Test func liveActivitiesKeepUpdatingWithAlertsOff() throws {
        let notification = try rendered(
            #"{"aps": {"timestamp": 1, "event": "update", "content-state": {"v": 2}, "alert": {"title": "T", "body": "B", "sound": "chime.aiff"}}}"#,
            settings: NotificationSettings(alert: true, badge: true, sound: false))
        #expect(notification.payloadString == #"{"aps":{"timestamp":1,"event":"update","content-state":{"v":2},"alert":{"title":"T","body":"B"}}}"#)
    }

    @Test func settingsDoNotTouchOtherPushTypes() throws {
        let voip = try rendered(
            #"{"aps": {"alert": "call"}, "id": 1}"#, extra: #""push_type": "voip""#,
            settings: NotificationSettings(alert: false, badge: false, sound: false))
        #expect(voip.payloadString == #"{"aps":{"alert":"call"},"id":1}"#)
    }

    @Test func anOverlongBodyIsCutAtACharacterBoundary() throws {
        let body = String(repeating: "a", count: 5000)
        let notification = try rendered(#"{"aps": {"alert": {"title": "T", "body": "\#(body)"}}}"#)
        #expect(notification.payload.count == 4096)
        #expect(notification.truncated)
        #expect(notification.payloadString.hasSuffix("a…\"}}}"))
    }

    /// CJK (3 bytes each) and emoji (4 bytes; a family emoji is one character of 25 bytes): never split.
    @Test(arguments: ["界", "😀", "👨‍👩‍👧‍👦", "é", "a\""])
    func truncationAtMultiByteCharacters(unit: String) throws {
        let body = String(repeating: unit, count: 6000 / unit.utf8.count + 10)
        var json: [UInt8] = []
        JSONValue.writeString(body, to: &json)
        let notification = try rendered(
            #"{"aps": {"alert": \#(String(decoding: json, as: UTF8.self))}, "pad": "\#(String(repeating: "p", count: 100))"}"#)
        #expect(notification.payload.count <= 4096)
        #expect(notification.payload.count > 4096 - 4 - unit.utf8.count * 2, "as much of the body as fits is kept")
        let parsed = try JSONValue.parse(notification.payload)
        let alert = try #require(parsed["aps"]?["alert"]?.stringValue)
        #expect(alert.hasSuffix("…"))
        let kept = String(alert.dropLast())
        #expect(kept.count > 0)
        #expect(body.hasPrefix(kept), "a prefix of the body")
        #expect(kept.unicodeScalars.elementsEqual(body.unicodeScalars.prefix(kept.unicodeScalars.count)), "only whole characters are kept")
        if unit.count == 1 { #expect(kept == String(repeating: unit, count: kept.count)) }
    }

    @Test func voipAllowsFiveKilobytes() throws {
        let data = String(repeating: "v", count: 4500)
        let voip = try rendered(#"{"data": "\#(data)"}"#, extra: #""push_type": "voip""#)
        #expect(voip.payload.count > 4096)
        #expect(!voip.truncated)
    }

    @Test func payloadsThatCannotFitAreRefused() throws {
        let big = String(repeating: "x", count: 5000)
        let noBody = try decodeRequest(requestBody(payload: #"{"aps": {"badge": 1}, "data": "\#(big)"}"#))
        #expect(throws: PushRequestError.self) { try NotificationRenderer(request: noBody, catalogs: .empty).preflight() }
        do {
            try NotificationRenderer(request: noBody, catalogs: .empty).preflight()
        } catch {
            #expect(error.code == .payloadTooLarge)
            let size = #"{"aps":{"badge":1},"data":""#.utf8.count + 5000 + 2
            #expect(error.message == "payload: the rendered payload is \(size) bytes; alert pushes allow 4096 (there is no alert body to shorten)")
        }
        let bodyTooSmallToHelp = try decodeRequest(requestBody(payload: #"{"aps": {"alert": "short"}, "data": "\#(big)"}"#))
        do {
            try NotificationRenderer(request: bodyTooSmallToHelp, catalogs: .empty).preflight()
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("even an alert body of \"…\" does not fit"))
        }
    }

    @Test func preflightChecksEveryCatalogChain() throws {
        // Only the German text is long enough to need cutting; the preflight renders it too.
        let long = String(repeating: "ü", count: 3000)
        let catalogs = LocalizationCatalogs(catalogs: [
            "en": StringsCatalog(strings: ["K": "short"]), "de": StringsCatalog(strings: ["K": long]),
        ])
        let request = try decodeRequest(
            requestBody(
                payload: #"{"aps": {"badge": 1, "alert": {"title-loc-key": "K"}}, "d": "\#(String(repeating: "x", count: 3000))"}"#,
                extra: #""localize": "server""#))
        let renderer = NotificationRenderer(request: request, catalogs: catalogs)
        #expect(renderer.possibleChains == [["en"], ["de", "en"]])
        #expect(throws: PushRequestError.self) { try renderer.preflight() }
    }

    @Test func sendBatchEncoderMatchesTheCodableFormat() throws {
        let payload = Array(#"{"aps":{"alert":"Quote \" and ünïcode 😀\n"}}"#.utf8)
        let tokens = [
            try DeviceToken(normalizing: String(repeating: "ab", count: 32)), try DeviceToken(normalizing: String(repeating: "cd", count: 40)),
        ]
        for (expiration, collapseID) in [(Int64?.some(1_767_225_600), String?.some("c/\"1")), (nil, nil)] {
            let encoder = SendBatchEncoder(
                requestID: "order-\"4711\"", app: "com.example.game", environment: .sandbox, pushType: "alert", priority: 10,
                expiration: expiration, collapseID: collapseID, payload: payload)
            let bytes = encoder.encode(batchID: "order-\"4711\"/3", tokens: tokens, createdAt: 1_767_225_000_123)
            let decoded = try JSONDecoder().decode(SendBatch.self, from: Data(bytes))
            #expect(
                decoded
                    == SendBatch(
                        requestID: "order-\"4711\"", batchID: "order-\"4711\"/3", app: "com.example.game", environment: .sandbox, pushType: "alert",
                        priority: 10, expiration: expiration, collapseID: collapseID, payload: String(decoding: payload, as: UTF8.self),
                        tokens: tokens.map(\.hex), createdAt: 1_767_225_000_123))
        }
        let encoder = SendBatchEncoder(
            requestID: "r", app: "com.example.game", environment: .production, pushType: "alert", priority: 5, expiration: nil, collapseID: nil,
            payload: payload)
        let carried = encoder.encode(batchID: "r/9", tokens: tokens, createdAt: 1, marks: (markSet: "r/4#\"x", slots: [7, 0]))
        let decoded = try JSONDecoder().decode(SendBatch.self, from: Data(carried))
        #expect(decoded.markSet == "r/4#\"x")
        #expect(decoded.slots == [7, 0])
        #expect(decoded.effectiveMarkSet == "r/4#\"x")
        #expect(decoded.slot(at: 0) == 7)
        let broadcast = try JSONDecoder().decode(
            SendBatch.self, from: Data(encoder.encodeBroadcast(batchID: "r/1", channel: "dHN0\"=", createdAt: 5)))
        #expect(broadcast.channel == "dHN0\"=")
        #expect(broadcast.tokens.isEmpty && broadcast.batchID == "r/1" && broadcast.createdAt == 5 && broadcast.markSet == nil)
    }

    /// A request id is 128 characters, but one character can be many bytes: the mark set a retry
    /// names must still fit what push-send takes.
    @Test func aBatchsMarkSetStaysWithinItsLimitWhateverTheRequestIDsBytes() {
        let tokens = [String(repeating: "ab", count: 32)]
        let short = SendBatch.markSet(batchID: "order-1/3", tokens: tokens)
        #expect(short == "order-1/3#\(SendBatch.fingerprint(tokens))")
        let heavy = String(repeating: "e\u{301}\u{302}\u{303}\u{304}", count: 128) + "/12"
        #expect(heavy.utf8.count > SendBatch.maximumMarkSetBytes)
        let bounded = SendBatch.markSet(batchID: heavy, tokens: tokens)
        #expect(bounded.utf8.count <= SendBatch.maximumMarkSetBytes)
        #expect(bounded != SendBatch.markSet(batchID: String(heavy.dropLast()) + "3", tokens: tokens), "other batch ids keep other mark sets")
    }
}

@Suite("JSONValue: strict parsing, order-keeping compact output")
struct JSONValueTests {
    @Test func roundTripKeepsOrderAndNumberText() throws {
        let text = #"{"b":[1,-2.50,3e10,0.0],"a":{"z":null,"y":true,"x":false},"s":"\u00e9\ud83d\ude00\n\"/\\","e":{},"l":[]}"#
        let value = try JSONValue.parse(text)
        #expect(value.serializedString == #"{"b":[1,-2.50,3e10,0.0],"a":{"z":null,"y":true,"x":false},"s":"é😀\n\"/\\","e":{},"l":[]}"#)
        #expect(try JSONValue.parse(value.serialized()) == value)
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "1e", "\"\\x\"", "\"\u{01}\"", "{\"a\" 1}", "[1 2]", "tru", "nul", "\"\\ud800\"",
        "\"\\udc00\"", "{\"a\":1}x", "{\"a\":1,\"a\":2}", "'a'", "[\"\\u12\"]",
    ])
    func invalidJSONIsRefused(text: String) {
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(text) }
    }

    @Test func invalidUTF8AndDeepNestingAreRefused() {
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(deep) }
        let fine = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        #expect(throws: Never.self) { try JSONValue.parse(fine) }
    }

    @Test func controlCharactersAreEscapedOnOutput() {
        #expect(JSONValue.string("a\u{01}b\u{1F}\t").serializedString == #""a\u0001b\u001f\t""#)
        #expect(JSONValue.serializedLength(of: "a\u{01}\"") == JSONValue.string("a\u{01}\"").serialized().count)
    }
}
