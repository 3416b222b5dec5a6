import PushCore
import TestSupport
import Testing

@Suite("Push request v1: decoding and validation")
struct PushRequestDecodingTests {
    @Test func theContractExampleDecodes() throws {
        let request = try decodeRequest(
            #"""
            {"id": "order-4711-shipped", "app": "com.example.game", "to": {"users": ["alice", "bob", "alice"]},
             "payload": {"aps": {"alert": {"title-loc-key": "SHIPPED_TITLE", "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]},
               "badge": 5, "sound": "bingbong.aiff"}, "myCustomData": ["bang", "bang"]},
             "localize": "device", "push_type": "alert", "priority": 10, "expiration": 1767225600, "collapse_id": "order-4711"}
            """#)
        #expect(request.id == "order-4711-shipped")
        #expect(request.app.bundleID == "com.example.game")
        #expect(request.target == .users(["alice", "bob"]), "repeats dropped")
        #expect(request.localization == .device)
        #expect(request.pushType == .alert)
        #expect(request.priority == 10)
        #expect(request.expiration == 1_767_225_600)
        #expect(request.collapseID == "order-4711")
    }

    @Test func targetsAndDefaults() throws {
        let token = String(repeating: "AB", count: 32)
        let tokens = try decodeRequest(
            requestBody(payload: #"{"aps": {"alert": "x"}}"#, to: #"{"tokens": ["<\#(token)>", "\#(token.lowercased())"]}"#))
        #expect(tokens.target == .tokens([try DeviceToken(normalizing: token)]), "normalised, repeats dropped")
        #expect(tokens.localization == .device, "device is the default")
        #expect(try decodeRequest(requestBody(payload: #"{"aps": {"alert": "x"}}"#, to: #"{"topic": "news"}"#)).target == .topic("news"))
        #expect(try decodeRequest(requestBody(payload: #"{"aps": {"alert": "x"}}"#, to: #"{"all": true}"#)).target == .all)
    }

    @Test func pushTypeAndPriorityInference() throws {
        let background = try decodeRequest(requestBody(payload: #"{"aps": {"content-available": 1}, "data": 1}"#))
        #expect(background.pushType == .background)
        #expect(background.priority == 5)
        let alert = try decodeRequest(requestBody(payload: #"{"aps": {"badge": 3}}"#))
        #expect(alert.pushType == .alert)
        #expect(alert.priority == 10)
        let live = try decodeRequest(requestBody(payload: #"{"aps": {"event": "end", "timestamp": 5}}"#))
        #expect(live.pushType == .liveactivity)
        let low = try decodeRequest(requestBody(payload: #"{"aps": {"alert": "x"}}"#, extra: #""priority": 1"#))
        #expect(low.priority == 1)
    }

    /// Each malformed request and the start of the reason it is dead-lettered with.
    @Test(arguments: [
        ("not json", "body: is not valid JSON"),
        ("[1, 2]", "body: must be a JSON object, got an array"),
        (#"{"id": "a", "id": "b"}"#, "body: is not valid JSON (the key \"id\" appears twice"),
        (#"{"app": "com.example.game", "to": {"all": true}, "payload": {}}"#, "id: is required"),
        (#"{"id": "", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#, "id: must be 1–128 characters"),
        (
            #"{"id": "\#(String(repeating: "x", count: 129))", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#,
            "id: must be 1–128 characters (got 129)"
        ),
        (#"{"id": "a", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#, "app: is required"),
        (#"{"id": "a", "app": "com.example.other", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#, "app: names no configured app"),
        (#"{"id": "a", "app": "com.example.game", "payload": {"aps": {"alert": "x"}}}"#, "to: is required"),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true, "topic": "x"}, "payload": {"aps": {"alert": "x"}}}"#,
            "to: must name exactly one of tokens, users, topic, all, activity, push_to_start, channel (got all, topic)"
        ),
        (#"{"id": "a", "app": "com.example.game", "to": {"all": false}, "payload": {"aps": {"alert": "x"}}}"#, "to.all: must be true"),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"tokens": ["abc"]}, "payload": {"aps": {"alert": "x"}}}"#,
            "to.tokens[0]: must be 64–200 hex characters"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"users": ["ok", ""]}, "payload": {"aps": {"alert": "x"}}}"#,
            "to.users[1]: must be a non-empty string"
        ),
        (#"{"id": "a", "app": "com.example.game", "to": {"all": true}}"#, "payload: is required"),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "pushtype": "alert"}"#,
            "pushtype: is not a push request field"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "localize": "both"}"#,
            "localize: must be \"device\" or \"server\""
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "push_type": "fax"}"#,
            "push_type: must be one of"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "push_type": "mdm"}"#,
            "push_type: mdm pushes are not supported"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "priority": 7}"#,
            "priority: must be 10, 5 or 1, got 7"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "expiration": -1}"#,
            "expiration: must be seconds since 1970"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "collapse_id": "\#(String(repeating: "c", count: 65))"}"#,
            "collapse_id: must be at most 64 bytes (got 65)"
        ),
        // Hostile-input catalogue: values that used to pass here and then failed at APNs.
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "collapse_id": "a\r\nx-evil: 1"}"#,
            "collapse_id: must not contain control characters"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "collapse_id": "a\u0000b"}"#,
            "collapse_id: must not contain control characters"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "expiration": 9999999999999999}"#,
            "expiration: must be seconds since 1970 up to 253402300799 (9999-12-31), got 9999999999999999"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "expiration": 1767225600000}"#,
            "expiration: must be seconds since 1970 up to 253402300799 (9999-12-31), got 1767225600000 (milliseconds? send seconds)"
        ),
        (
            #"{"id": "a", "app": "com.example.game", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}, "expiration": 9223372036854775807}"#,
            "expiration: must be seconds since 1970 up to 253402300799"
        ),
    ])
    func malformedRequestsNameTheField(body: String, reason: String) {
        let error = refusal(body)
        #expect(error?.message.hasPrefix(reason) == true, "got \(error?.message ?? "no error")")
    }

    @Test func theLatestExpirationIsTheLastSecondOfYear9999() throws {
        let request = try decodeRequest(requestBody(payload: #"{"aps": {"alert": "x"}}"#, extra: #""expiration": 253402300799"#))
        #expect(request.expiration == PushRequest.maximumExpiration)
        #expect(try decodeRequest(requestBody(payload: #"{"aps": {"alert": "x"}}"#, extra: #""expiration": -0"#)).expiration == 0)
    }

    /// Payload rules: (payload, extra fields, reason prefix).
    @Test(arguments: [
        (#"[]"#, "", "payload: must be an object"),
        (#"{"aps": "x"}"#, "", "payload.aps: must be an object, got a string"),
        (#"{"aps": {"badge": "5"}}"#, "", "payload.aps.badge: must be a whole number ≥ 0, got \"5\""),
        (#"{"aps": {"badge": -1}}"#, "", "payload.aps.badge: must be a whole number ≥ 0, got -1"),
        (#"{"aps": {"alert": 5}}"#, "", "payload.aps.alert: must be a string or an object, got a number"),
        (#"{"aps": {"alert": {"loc-key": "K", "loc-args": ["a", 2]}}}"#, "", "payload.aps.alert.loc-args[1]: must be a string, got 2"),
        (#"{"aps": {"alert": {"loc-args": ["a"]}}}"#, "", "payload.aps.alert.loc-args: needs loc-key in the same alert"),
        (#"{"aps": {"alert": {"titel": "x"}}}"#, "", "payload.aps.alert.titel: is not an alert key Apple documents"),
        (#"{"aps": {"alert": "x", "sound": ""}}"#, "", "payload.aps.sound: must not be empty"),
        (#"{"aps": {"alert": "x", "sound": {"critical": 1, "volume": 0.5}}}"#, "", "payload.aps.sound.name: is required"),
        (
            #"{"aps": {"alert": "x", "sound": {"critical": 1, "name": "a.wav", "volume": 2}}}"#, "",
            "payload.aps.sound.volume: must be a number from 0 to 1, got 2"
        ),
        (
            #"{"aps": {"alert": "x", "sound": {"critical": true, "name": "a.wav"}}}"#, "",
            "payload.aps.sound.critical: must be the number 1 (or 0), got true"
        ),
        (#"{"aps": {"content-available": true}}"#, "", "payload.aps.content-available: must be the number 1 (or 0), got true"),
        (
            #"{"aps": {"alert": "x", "interruption-level": "urgent"}}"#, "",
            "payload.aps.interruption-level: must be one of passive, active, time-sensitive, critical"
        ),
        (#"{"aps": {"alert": "x", "relevance-score": 1.5}}"#, "", "payload.aps.relevance-score: must be from 0 to 1"),
        (#"{"aps": {"alert": "x", "content_available": 1}}"#, "", "payload.aps.content_available: is not an aps key Apple documents"),
        (#"{"aps": {}}"#, "", "payload.aps: has nothing to show"),
        (
            #"{"aps": {"content-available": 1, "badge": 1}}"#, #""push_type": "background""#,
            "payload.aps.badge: a background push carries only content-available"
        ),
        (
            #"{"aps": {"content-available": 1, "alert": "x"}}"#, #""push_type": "background""#,
            "payload.aps.alert: a background push carries only content-available (no alert, badge or sound)"
        ),
        (#"{"aps": {"content-available": 1}}"#, #""priority": 10"#, "priority: 10 is not allowed for background pushes (use 5)"),
        (#"{"aps": {"content-available": 1}}"#, #""push_type": "alert""#, "push_type: alert needs an alert, badge or sound"),
        (
            #"{"aps": {"alert": "x", "event": "update"}}"#, #""push_type": "alert""#,
            "payload.aps.event: is a Live Activity key; it needs push_type liveactivity"
        ),
        (#"{"aps": {"event": "update", "timestamp": 1}}"#, "", "payload.aps.content-state: is required for event update"),
        (#"{"aps": {"event": "update", "content-state": {}}}"#, "", "payload.aps.timestamp: is required in a Live Activity push"),
        (#"{"aps": {"event": "start", "timestamp": 1, "content-state": {}}}"#, "", "payload.aps.attributes-type: is required for event start"),
        (#"{"aps": {"event": "finish", "timestamp": 1}}"#, "", "payload.aps.event: must be one of start, update, end"),
        (
            #"{"aps": {"event": "update", "timestamp": 1, "content-state": {}, "input-push-channel": "dGVzdA=="}}"#, "",
            "payload.aps.input-push-channel: is only for event start (got update)"
        ),
        (#"{"aps": {"event": "end", "timestamp": 1, "badge": 1}}"#, "", "payload.aps.badge: is not part of a Live Activity push"),
        (#"{"aps": {"event": "end", "timestamp": 1}}"#, #""priority": 1"#, "priority: 1 is not allowed for liveactivity pushes"),
        (#"{"aps": {"alert": {"title": {"loc-key": "K"}}}}"#, "", "payload.aps.alert.title: the {loc-key, loc-args} form is for Live Activities"),
        (#"{"aps": {"content-changed": true, "alert": "x"}}"#, "", "payload.aps.content-changed: is for widgets and controls pushes"),
    ])
    func payloadRulesNameTheField(payload: String, extra: String, reason: String) {
        let error = refusal(requestBody(payload: payload, extra: extra))
        #expect(error?.message.hasPrefix(reason) == true, "got \(error?.message ?? "no error")")
    }

    /// Decoders are fuzzed: random mutations of a valid request never crash and always end in
    /// either a request or an error naming a field.
    @Test func mutatedRequestsNeverCrash() {
        let valid = Array(
            #"{"id": "x", "app": "com.example.game", "to": {"tokens": ["\#(String(repeating: "ab", count: 32))"]}, "payload": {"aps": {"alert": {"loc-key": "K", "loc-args": ["é", "😀"]}, "sound": {"critical": 1, "name": "a", "volume": 0.5}}, "c": [1, 2.5e3, null]}}"#
                .utf8)
        var generator = SplitMix64(seed: 42)
        let alphabet = Array(#"{}[]:,"\ 0123456789.eE+-truefalsnul"#.utf8) + [0xC3, 0xA9, 0xFF, 0x00]
        for _ in 0..<5_000 {
            let bytes = generator.mutated(valid, alphabet: alphabet)
            do {
                _ = try PushRequest(body: bytes, apps: renderTestApps())
            } catch {
                #expect(!error.field.isEmpty && !error.reason.isEmpty)
            }
        }
    }
}
