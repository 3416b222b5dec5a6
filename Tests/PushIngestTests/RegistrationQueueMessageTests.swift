import Foundation
import PushCore
import PushIngest
import Testing

/// Decoding `push.registrations` messages (pure; no server needed).
@Suite("Registration queue messages")
struct RegistrationQueueMessageTests {
    static let app = "com.example.game"
    static let token = String(repeating: "0f", count: 32)
    static let apps = try! AppsFile(apps: [
        AppConfiguration(
            bundleID: app,
            environment: .sandbox,
            apns: .token(AppConfiguration.TokenKey(keyFile: "key.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
    ])

    private func decode(_ text: String) throws(RegistrationError) -> RegistrationMessage {
        try RegistrationMessage(body: Array(text.utf8), apps: Self.apps)
    }

    private func failure(_ text: String) -> RegistrationError? {
        do {
            _ = try decode(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func anUpsertCarriesTheRegistration() throws {
        let message = try decode(#"{"app": "\#(Self.app)", "token": "<\#(Self.token.uppercased())>", "user": "alice", "topics": ["news"]}"#)
        guard case .upsert(let app, let token, let registration) = message else {
            Issue.record("expected an upsert, got \(message)")
            return
        }
        #expect(app.bundleID == Self.app)
        #expect(app.environment == .sandbox)
        #expect(token.hex == Self.token)
        #expect(registration == DeviceRegistration(user: "alice", topics: ["news"]))
        #expect(message.operationName == "upsert")
        #expect(
            try decode(#"{"app": "\#(Self.app)", "token": "\#(Self.token)", "op": "upsert"}"#)
                == .upsert(app: app, token: token, registration: DeviceRegistration()))
    }

    @Test func aDeleteNeedsOnlyAppAndToken() throws {
        let message = try decode(#"{"app": "\#(Self.app)", "token": "\#(Self.token)", "op": "delete", "user": "ignored"}"#)
        #expect(message == .delete(app: Self.apps.app(bundleID: Self.app)!, token: try DeviceToken(normalizing: Self.token)))
        #expect(message.operationName == "delete")
    }

    @Test(arguments: [
        (#"not json"#, "body", RegistrationError.Code.invalidJSON),
        (#"["app"]"#, "body", .invalidJSON),
        (#"{"token": "\#(token)"}"#, "app", .missingField),
        (#"{"app": 5, "token": "\#(token)"}"#, "app", .invalidField),
        (#"{"app": "com.example.other", "token": "\#(token)"}"#, "app", .invalidField),
        (#"{"app": "\#(app)"}"#, "token", .missingField),
        (#"{"app": "\#(app)", "token": 12}"#, "token", .invalidField),
        (#"{"app": "\#(app)", "token": "xyz"}"#, "token", .invalidToken),
        (#"{"app": "\#(app)", "token": "\#(token)", "op": "purge"}"#, "op", .invalidField),
        (#"{"app": "\#(app)", "token": "\#(token)", "op": 1}"#, "op", .invalidField),
        (#"{"app": "\#(app)", "token": "\#(token)", "settings": {"alert": "on"}}"#, "settings.alert", .invalidField),
        (#"{"app": "\#(app)", "token": "\#(token)", "colour": "red"}"#, "colour", .invalidField),
        // Hostile-input catalogue (tests/system/test_hostile.py): a number too large for a Double is still a
        // number of its field, and JSON that different readers read differently is refused.
        (#"{"app": "\#(app)", "token": "\#(token)", "registered_at": 1e400}"#, "registered_at", .invalidField),
        (#"{"app": "\#(app)", "token": "\#(token)", "registered_at": 1\#(String(repeating: "0", count: 400))}"#, "registered_at", .invalidField),
        (#"{"app": "\#(app)", "token": "\#(token)", "user": 1e400}"#, "user", .invalidField),
        (#"{"app": "\#(app)", "token": "\#(token)", "token": "\#(String(repeating: "1f", count: 32))"}"#, "body", .invalidJSON),
        (#"{"app": "\#(app)", "token": "\#(token)", "user": "a", "user": "b", "registered_at": 1}"#, "body", .invalidJSON),
        ("\u{FEFF}" + #"{"app": "\#(app)", "token": "\#(token)"}"#, "body", .invalidJSON),
        (#"{"app": "\#(app)", "token": "\#(token)", "device": \#(String(repeating: "[", count: 100_000))"#, "body", .invalidJSON),
    ])
    func invalidMessagesNameTheField(body: String, field: String, code: RegistrationError.Code) {
        let error = failure(body)
        #expect(error?.field == field, "\(body): \(error?.message ?? "no error")")
        #expect(error?.code == code, "\(body): \(error?.message ?? "no error")")
        #expect(error?.message.hasPrefix("\(field): ") == true)
    }

    @Test func aWholeNumberWrittenWithAFractionOrAnExponentIsWhole() throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for written in ["\(now).0", "\(Double(now) / 1e12)e12"] where Double(written).map({ Int64(exactly: $0) == now }) == true {
            let (_, registeredAt) = try RegistrationMessage.decode(
                body: Array(#"{"app": "\#(Self.app)", "token": "\#(Self.token)", "registered_at": \#(written)}"#.utf8), apps: Self.apps)
            #expect(registeredAt == now, "\(written)")
        }
    }

    @Test func aBodyInUTF16IsRefused() {
        let text = #"{"app": "\#(Self.app)", "token": "\#(Self.token)"}"#
        var utf16: [UInt8] = [0xFF, 0xFE]
        for unit in text.utf16 { utf16 += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        do throws(RegistrationError) {
            _ = try RegistrationMessage(body: utf16, apps: Self.apps)
            Issue.record("a UTF-16 body was accepted")
        } catch {
            #expect(error.field == "body" && error.code == .invalidJSON, "\(error.message)")
        }
    }

    @Test func theUnknownAppIsNamedInTheReason() {
        #expect(
            failure(#"{"app": "com.example.other", "token": "\#(Self.token)"}"#)?.message == #"app: names no configured app: "com.example.other""#)
    }
}
