import PushCore
import Testing

/// Rendered payloads compared byte for byte with what APNs should receive: Apple's documented
/// examples ("Generating a remote notification", "Pushing background updates", critical alerts,
/// "Starting and updating Live Activities with ActivityKit push notifications") and this project's cases.
@Suite("Payload rendering: golden payloads")
struct PayloadGoldenTests {
    @Test func appleAlertExampleWithCustomKeyIsSentAsGiven() throws {
        let payload = """
            {
               "aps" : {
                  "alert" : {
                     "title" : "Game Request",
                     "subtitle" : "Five Card Draw",
                     "body" : "Bob wants to play poker"
                  },
                  "category" : "GAME_INVITATION"
               },
               "gameID" : "12345678"
            }
            """
        let notification = try rendered(payload)
        #expect(
            notification.payloadString
                == #"{"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker"},"category":"GAME_INVITATION"},"gameID":"12345678"}"#
        )
        #expect(notification.pushType == .alert)
        #expect(notification.priority == 10)
    }

    @Test func stringAlertWithBadgeAndSound() throws {
        let notification = try rendered(
            #"{"aps": {"alert": "Message received from Bob", "badge": 9, "sound": "bingbong.aiff"}, "acme": ["bang", "whiz"]}"#)
        #expect(
            notification.payloadString == #"{"aps":{"alert":"Message received from Bob","badge":9,"sound":"bingbong.aiff"},"acme":["bang","whiz"]}"#)
    }

    @Test func locKeyWithArgumentsGoesToTheDevice() throws {
        let notification = try rendered(#"{"aps": {"alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Shelly", "Rick"]}}}"#)
        #expect(notification.payloadString == #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"]}}}"#)
        #expect(notification.deviceFallbackKeys.isEmpty, "device localisation is not a fallback")
    }

    @Test func locKeyRenderedOnTheServer() throws {
        let notification = try rendered(
            #"{"aps": {"alert": {"title-loc-key": "SHIPPED_TITLE", "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]}, "badge": 5, "sound": "bingbong.aiff"}, "myCustomData": ["bang", "bang"]}"#,
            extra: #""localize": "server""#, catalogs: sampleCatalogs, locale: "en-US")
        #expect(
            notification.payloadString
                == #"{"aps":{"alert":{"title":"Your order has shipped","body":"Jenna and Frank have invited you to play Monopoly"},"badge":5,"sound":"bingbong.aiff"},"myCustomData":["bang","bang"]}"#
        )
        #expect(notification.localizedWith == ["en"])
    }

    @Test func customKeysKeepTheirOrderTypesAndNumberText() throws {
        let notification = try rendered(
            #"{"zeta": {"b": 1.50, "a": [true, false, null]}, "aps": {"alert": "Hi"}, "alpha": -0.0e-5, "text": "quote \" slash / tab \t é 😀"}"#)
        #expect(
            notification.payloadString
                == #"{"zeta":{"b":1.50,"a":[true,false,null]},"aps":{"alert":"Hi"},"alpha":-0.0e-5,"text":"quote \" slash / tab \t é 😀"}"#)
    }

    @Test func silentBackgroundPush() throws {
        let notification = try rendered(#"{"aps": {"content-available": 1}, "acme1": "bar", "acme2": 42}"#)
        #expect(notification.payloadString == #"{"aps":{"content-available":1},"acme1":"bar","acme2":42}"#)
        #expect(notification.pushType == .background)
        #expect(notification.priority == 5)
    }

    @Test func criticalAlertSound() throws {
        let notification = try rendered(
            #"{"aps": {"alert": "Gas leak detected", "sound": {"critical": 1, "name": "critical-alert-sound.wav", "volume": 1.0}, "interruption-level": "critical"}}"#
        )
        #expect(
            notification.payloadString
                == #"{"aps":{"alert":"Gas leak detected","sound":{"critical":1,"name":"critical-alert-sound.wav","volume":1.0},"interruption-level":"critical"}}"#
        )
    }

    @Test func everyNotificationKey() throws {
        let payload = #"""
            {"aps": {"alert": {"title": "T", "subtitle": "S", "body": "B", "launch-image": "launch.png", "action-loc-key": "PLAY",
              "summary-arg": "Bob", "summary-arg-count": 2}, "badge": 0, "sound": "default", "thread-id": "chat-42",
              "category": "MESSAGE", "content-available": 1, "mutable-content": 1, "target-content-id": "window-1",
              "interruption-level": "time-sensitive", "relevance-score": 0.75, "filter-criteria": "work"}}
            """#
        let notification = try rendered(payload)
        #expect(
            notification.payloadString
                == #"{"aps":{"alert":{"title":"T","subtitle":"S","body":"B","launch-image":"launch.png","action-loc-key":"PLAY","summary-arg":"Bob","summary-arg-count":2},"badge":0,"sound":"default","thread-id":"chat-42","category":"MESSAGE","content-available":1,"mutable-content":1,"target-content-id":"window-1","interruption-level":"time-sensitive","relevance-score":0.75,"filter-criteria":"work"}}"#
        )
        #expect(notification.pushType == .alert, "an alert with content-available stays an alert push")
    }

    @Test func liveActivityUpdate() throws {
        let payload = #"""
            {"aps": {"timestamp": 1685952000, "event": "update",
              "content-state": {"currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!"},
              "stale-date": 1685959200, "relevance-score": 75,
              "alert": {"title": {"loc-key": "%@ is on an adventure!", "loc-args": ["Power Panda"]},
                        "body": {"loc-key": "%@ found a sword!", "loc-args": ["Power Panda"]}, "sound": "chime.aiff"}}}
            """#
        let notification = try rendered(payload)
        #expect(
            notification.payloadString
                == #"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"currentHealthLevel":0.941,"eventDescription":"Power Panda found a sword!"},"stale-date":1685959200,"relevance-score":75,"alert":{"title":{"loc-key":"%@ is on an adventure!","loc-args":["Power Panda"]},"body":{"loc-key":"%@ found a sword!","loc-args":["Power Panda"]},"sound":"chime.aiff"}}}"#
        )
        #expect(notification.pushType == .liveactivity, "inferred from the Live Activity keys")
        #expect(notification.pushType.topic(forBundleID: "com.example.game") == "com.example.game.push-type.liveactivity")
        #expect(notification.priority == 10)
    }

    @Test func liveActivityStartAndEnd() throws {
        let start = try rendered(
            #"{"aps": {"timestamp": 1, "event": "start", "content-state": {"x": 1}, "attributes-type": "AdventureAttributes", "attributes": {"hero": "Panda"}, "input-push-token": 1, "alert": {"title": "Go", "body": "Now"}}}"#
        )
        #expect(start.payloadString.contains(#""attributes-type":"AdventureAttributes","attributes":{"hero":"Panda"},"input-push-token":1"#))
        let end = try rendered(#"{"aps": {"timestamp": 2, "event": "end", "dismissal-date": 3}}"#, extra: #""priority": 5"#)
        #expect(end.payloadString == #"{"aps":{"timestamp":2,"event":"end","dismissal-date":3}}"#)
        #expect(end.priority == 5)
    }

    @Test func liveActivityAlertLocalizedOnTheServer() throws {
        let catalogs = LocalizationCatalogs(catalogs: ["en": StringsCatalog(strings: ["ADVENTURE": "%@ is on an adventure!"])])
        let notification = try rendered(
            #"{"aps": {"timestamp": 1, "event": "update", "content-state": {}, "alert": {"title": {"loc-key": "ADVENTURE", "loc-args": ["Power Panda"]}, "body": {"loc-key": "MISSING", "loc-args": []}}}}"#,
            extra: #""localize": "server""#, catalogs: catalogs)
        #expect(
            notification.payloadString
                == #"{"aps":{"timestamp":1,"event":"update","content-state":{},"alert":{"title":"Power Panda is on an adventure!","body":{"loc-key":"MISSING","loc-args":[]}}}}"#
        )
        #expect(notification.deviceFallbackKeys == ["MISSING"])
    }

    @Test func voipAndWidgetPushTypes() throws {
        let voip = try rendered(#"{"callID": "c-1", "caller": "Bob"}"#, extra: #""push_type": "voip""#)
        #expect(voip.payloadString == #"{"callID":"c-1","caller":"Bob"}"#)
        #expect(voip.pushType.maximumPayloadSize == 5120)
        #expect(voip.pushType.topic(forBundleID: "com.example.game") == "com.example.game.voip")
        let widgets = try rendered(#"{"aps": {"content-changed": true}}"#, extra: #""push_type": "widgets""#)
        #expect(widgets.payloadString == #"{"aps":{"content-changed":true}}"#)
        #expect(widgets.pushType.topic(forBundleID: "com.example.game") == "com.example.game.push-type.widgets")
    }
}
