import Foundation
import PushCore
import Testing

/// The registration body decoder and the record encoder of PushCore (pure; no server needed).
@Suite("Registration JSON")
struct DeviceRegistrationJSONTests {
    static let fullBody = #"""
        {"user": "alice", "locale": "zh-Hant-TW", "environment": "sandbox", "topics": ["news", "sports", "news"],
         "device": {"uuid": "U-1", "name": "Alice's iPhone", "model": "iPhone15,2", "os_version": "17.4", "app_version": "2.1"},
         "settings": {"alert": true, "badge": false, "sound": true}}
        """#

    private func decode(_ text: String) throws(RegistrationError) -> DeviceRegistration {
        try DeviceRegistration(json: try DeviceRegistration.decode(body: Array(text.utf8)))
    }

    private func error(_ text: String) -> RegistrationError? {
        do {
            _ = try decode(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func theContractsBodyDecodes() throws {
        let registration = try decode(Self.fullBody)
        #expect(
            registration
                == DeviceRegistration(
                    user: "alice",
                    locale: "zh-Hant-TW",
                    environment: .sandbox,
                    topics: ["news", "sports"],
                    device: DeviceInfo(uuid: "U-1", name: "Alice's iPhone", model: "iPhone15,2", osVersion: "17.4", appVersion: "2.1"),
                    settings: NotificationSettings(alert: true, badge: false, sound: true)
                )
        )
    }

    @Test func everyFieldIsOptionalAndNullMeansLeftOut() throws {
        #expect(try decode("{}") == DeviceRegistration())
        #expect(try decode(#"{"user": null, "topics": null, "device": null, "settings": {"badge": null}}"#) == DeviceRegistration())
        // A setting left out is enabled.
        #expect(try decode(#"{"settings": {"sound": false}}"#).settings == NotificationSettings(alert: true, badge: true, sound: false))
        #expect(try decode(#"{"locale": "en_GB"}"#).locale == "en_GB")
    }

    @Test(arguments: [
        (#"{"setings": {}}"#, "setings", "is not a registration field"),
        (#"{"app": "x"}"#, "app", "is not a registration field"),
        (#"{"user": 7}"#, "user", "must be a string, got a number"),
        (#"{"user": ""}"#, "user", "must not be empty"),
        (#"{"user": "a\u0000b"}"#, "user", "control characters"),
        (#"{"device": {"name": "Alice\u001b[2J"}}"#, "device.name", "control characters"),
        (#"{"device": {"model": "x\u009by"}}"#, "device.model", "control characters"),
        (#"{"device": {"app_version": "1.0\n2"}}"#, "device.app_version", "control characters"),
        (#"{"locale": "zh Hant"}"#, "locale", "letters, digits"),
        (#"{"locale": ""}"#, "locale", "letters, digits"),
        (#"{"environment": "staging"}"#, "environment", #"must be "production" or "sandbox", got "staging""#),
        (#"{"environment": true}"#, "environment", "must be a string, got a boolean"),
        (#"{"topics": "news"}"#, "topics", "must be an array of strings, got a string"),
        (#"{"topics": ["news", 3]}"#, "topics[1]", "must be a string, got a number"),
        (#"{"topics": [""]}"#, "topics[0]", "must not be empty"),
        (#"{"topics": ["breaking news"]}"#, "topics[0]", "whitespace"),
        (#"{"device": []}"#, "device", "must be an object, got an array"),
        (#"{"device": {"os": "17"}}"#, "device.os", "is not a device field"),
        (#"{"device": {"uuid": 1}}"#, "device.uuid", "must be a string, got a number"),
        (#"{"settings": true}"#, "settings", "must be an object, got a boolean"),
        (#"{"settings": {"alert": 1}}"#, "settings.alert", "must be true or false, got a number"),
        (#"{"settings": {"alert": "yes"}}"#, "settings.alert", "must be true or false, got a string"),
        (#"{"settings": {"volume": true}}"#, "settings.volume", "is not a setting"),
    ])
    func badFieldsAreNamed(body: String, field: String, reason: String) {
        let error = error(body)
        #expect(error?.field == field, "\(body)")
        #expect(error?.message.hasPrefix("\(field): ") == true, "\(error?.message ?? "no error")")
        #expect(error?.reason.contains(reason) == true, "\(error?.message ?? "no error")")
        #expect(error?.code == .invalidField, "\(body)")
    }

    @Test func limitsAreEnforced() {
        let tooManyTopics = "[" + (0...100).map { "\"t\($0)\"" }.joined(separator: ",") + "]"
        #expect(error(#"{"topics": \#(tooManyTopics)}"#)?.field == "topics")
        #expect(error(#"{"topics": ["\#(String(repeating: "x", count: 129))"]}"#)?.field == "topics[0]")
        #expect(error(#"{"user": "\#(String(repeating: "x", count: 257))"}"#)?.field == "user")
        #expect(error(#"{"locale": "\#(String(repeating: "x", count: 36))"}"#)?.field == "locale")
        #expect(error(#"{"device": {"name": "\#(String(repeating: "x", count: 257))"}}"#)?.field == "device.name")
        #expect(throws: Never.self) { try decode(#"{"topics": ["\#(String(repeating: "x", count: 128))"]}"#) }
    }

    @Test(arguments: ["", "not json", "[1, 2]", "\"text\"", "{\"user\": ", "null"])
    func bodiesThatAreNotAJSONObjectAreRefused(body: String) {
        let error = error(body)
        #expect(error?.code == .invalidJSON, "\(body)")
        #expect(error?.field == "body", "\(body)")
    }

    @Test func swiftValuesBuiltInCodeDecodeLikeParsedOnes() throws {
        let registration = try DeviceRegistration(json: [
            "user": "bob", "topics": ["a"], "settings": ["alert": false, "badge": true], "device": ["uuid": "U"],
        ])
        #expect(registration.user == "bob")
        #expect(registration.settings == NotificationSettings(alert: false, badge: true, sound: true))
        #expect(registration.device.uuid == "U")
        // A Swift integer is not a boolean either.
        #expect(throws: RegistrationError.self) { try DeviceRegistration(json: ["settings": ["alert": 1]]) }
    }

    @Test func aRecordEncodesAsTheAPIReturnsIt() throws {
        let token = try DeviceToken(normalizing: String(repeating: "ab", count: 32))
        var record = DeviceRecord(
            app: "com.example.game",
            token: token,
            user: "al\"ice/\n",
            locale: nil,
            environment: .production,
            topics: ["news", "ünï"],
            device: DeviceInfo(uuid: "U-1", osVersion: "17.4"),
            settings: NotificationSettings(alert: true, badge: false, sound: true),
            registeredAt: 1_767_225_600_000,
            updatedAt: 1_767_225_600_123
        )
        let text = String(decoding: record.jsonData(), as: UTF8.self)
        #expect(
            text
                == #"{"app":"com.example.game","device":{"os_version":"17.4","uuid":"U-1"},"environment":"production","#
                + #""registered_at":1767225600000,"settings":{"alert":true,"badge":false,"sound":true},"#
                + #""token":"\#(token.hex)","topics":["news","ünï"],"updated_at":1767225600123,"user":"al\"ice/\n"}"#
        )
        // jsonData and jsonObject say the same thing.
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(record.jsonData())) as? NSDictionary)
        #expect(parsed == record.jsonObject as NSDictionary)
        #expect(record.jsonObject["locale"] == nil)

        // A record written back as a registration body decodes to the same registration fields.
        record.user = "alice"
        var body = record.jsonObject
        for key in ["app", "token", "registered_at", "updated_at"] { body.removeValue(forKey: key) }
        let registration = try DeviceRegistration(json: body)
        #expect(registration.user == record.user && registration.topics == record.topics && registration.device == record.device)
        #expect(registration.settings == record.settings && registration.environment == record.environment)
    }
}
