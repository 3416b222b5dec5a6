import Foundation
import PushConsole
import PushCore
import Testing

struct ComposeFormTests {
    static func json(_ fields: [String: String]) throws -> [String: Any] {
        let body = try ComposeForm(fields: fields).requestJSON(generatedID: "generated-1")
        return try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
    }

    @Test func formFieldsMakeAPushRequest() throws {
        let request = try Self.json([
            "app": "com.example.game", "target_kind": "topic", "target": " news ", "title_loc_key": "SHIPPED_TITLE", "loc_key": "GAME",
            "loc_args": "Jenna, Frank", "badge": "3", "sound": "ping.aiff", "localize": "server", "priority": "5", "expiration": "0",
            "collapse_id": "c1", "push_type": "",
        ])
        #expect(request["id"] as? String == "generated-1")
        #expect(request["app"] as? String == "com.example.game")
        #expect((request["to"] as? [String: String]) == ["topic": "news"])
        let aps = try #require((request["payload"] as? [String: Any])?["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title-loc-key"] as? String == "SHIPPED_TITLE" && alert["loc-key"] as? String == "GAME")
        #expect(alert["loc-args"] as? [String] == ["Jenna", "Frank"])
        #expect(aps["badge"] as? Int == 3 && aps["sound"] as? String == "ping.aiff")
        #expect(request["localize"] as? String == "server" && request["priority"] as? Int == 5 && request["expiration"] as? Int == 0)
        #expect(request["push_type"] == nil, "empty means inferred")
    }

    @Test func rawJSONWinsAndTargetsSplitOnCommasAndSpaces() throws {
        let request = try Self.json([
            "app": "a", "target_kind": "users", "target": "alice, bob\ncarol", "request_id": "mine", "title": "ignored",
            "payload_json": #"{"aps": {"content-available": 1}, "k": [1]}"#,
        ])
        #expect(request["id"] as? String == "mine")
        #expect((request["to"] as? [String: [String]]) == ["users": ["alice", "bob", "carol"]])
        #expect(((request["payload"] as? [String: Any])?["aps"] as? [String: Int]) == ["content-available": 1])
        #expect((try Self.json(["app": "a", "target_kind": "all", "body": "hi"])["to"] as? [String: Bool]) == ["all": true])
    }

    @Test func badFieldsAreNamed() {
        func field(_ fields: [String: String]) -> String? {
            do {
                _ = try ComposeForm(fields: fields).requestJSON(generatedID: "g")
                return nil
            } catch {
                return error.field
            }
        }
        #expect(field(["target_kind": "all", "body": "x"]) == "app")
        #expect(field(["app": "a", "target_kind": "everyone", "body": "x"]) == "target_kind")
        #expect(field(["app": "a", "target_kind": "tokens", "target": " , ", "body": "x"]) == "target")
        #expect(field(["app": "a", "target_kind": "all"]) == "payload")
        #expect(field(["app": "a", "target_kind": "all", "payload_json": "[1]"]) == "payload_json")
        #expect(field(["app": "a", "target_kind": "all", "badge": "-1"]) == "badge")
        #expect(field(["app": "a", "target_kind": "all", "body": "x", "priority": "high"]) == "priority")
        #expect(field(["app": "a", "target_kind": "all", "body": "x", "expiration": "tomorrow"]) == "expiration")
        #expect(field(["app": "a", "target_kind": "all", "body": "x", "localize": "maybe"]) == "localize")
        #expect(field(["app": "a", "target_kind": "all", "loc_args": "x"]) == "loc_args")
    }

    @Test func generatedIDsSayWhenAndAreShort() {
        let id = ComposeForm.generatedID(now: 1_767_225_000_000, random: 0xbeef)
        #expect(id == "console-20251231-235000-0000beef")
    }
}

struct OperatorCredentialsTests {
    static let hash = PasswordHash.make(password: "correct horse battery", rounds: 100_000)

    @Test func passwordsAndKeysAreCheckedAgainstTheirHashes() throws {
        let key = String(repeating: "k", count: 40)
        let file =
            #"{"operators": [{"name": "alice", "password": "\#(Self.hash.encoded)"}], "api_keys": [{"name": "bot", "key_sha256": "\#(OperatorCredentials.keyDigestHex(key))"}]}"#
        let credentials = try OperatorCredentials.parse(Array(file.utf8))
        #expect(credentials.authenticate(name: "alice", password: "correct horse battery") == "alice")
        #expect(credentials.authenticate(name: "alice", password: "correct horse batter") == nil)
        #expect(credentials.authenticate(name: "mallory", password: "correct horse battery") == nil)
        #expect(credentials.apiKeyName(key) == "bot")
        #expect(credentials.apiKeyName(key + "x") == nil)
        #expect(PasswordHash(encoded: Self.hash.encoded) == Self.hash)
    }

    @Test func aBadOperatorsFileNamesTheEntryAndField() {
        func message(_ text: String) -> String {
            do {
                _ = try OperatorCredentials.parse(Array(text.utf8), source: "ops.json")
                return ""
            } catch {
                return error.description
            }
        }
        #expect(message("{}").contains("names no operator and no API key"))
        #expect(message("[1]").contains("must be a JSON object"))
        #expect(message(#"{"operators": [{"name": "alice", "password": "hunter2"}]}"#).contains("operators[0].password must be pbkdf2-sha256"))
        #expect(message(#"{"operators": [{"name": "", "password": "x"}]}"#).contains("operators[0].name"))
        #expect(message(#"{"api_keys": [{"name": "bot", "key_sha256": "abc"}]}"#).contains("api_keys[0].key_sha256"))
        #expect(
            message(#"{"operators": [{"name": "a", "password": "\#(Self.hash.encoded)"}, {"name": "a", "password": "\#(Self.hash.encoded)"}]}"#)
                .contains("appears twice"))
        #expect(message(#"{"operators": [{"name": "a", "password": "pbkdf2-sha256$1000$AAAAAAAAAAA=$AAAA"}]}"#).contains("rounds"))
    }
}
