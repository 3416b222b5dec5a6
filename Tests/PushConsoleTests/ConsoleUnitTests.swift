import Foundation
import PushCore
import Testing

@testable import PushConsole

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
        #expect(credentials.verify(name: "alice", password: "correct horse battery"))
        #expect(!credentials.verify(name: "alice", password: "correct horse batter"))
        #expect(!credentials.verify(name: "mallory", password: "correct horse battery"))
        #expect(credentials.apiKey(key)?.name == "bot")
        #expect(credentials.apiKey(key + "x") == nil)
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

struct ConsolePermissionsTests {
    static let hash = PasswordHash.make(password: "correct horse battery", rounds: 100_000).encoded

    static func parse(_ entry: String) throws -> OperatorCredentials {
        try OperatorCredentials.parse(Array(#"{"operators": [{"name": "alice", "password": "\#(hash)", \#(entry)}]}"#.utf8), source: "ops.json")
    }

    @Test func scopesAreGrantedForTheEntrysAppsOrOneAppEach() throws {
        let credentials = try Self.parse(#""scopes": ["read", "send:com.a", "tokens"], "apps": ["com.a", "com.b"]"#)
        let permissions = try #require(credentials.permissions(of: "alice"))
        #expect(permissions.allows(.read, app: "com.b") && !permissions.allows(.read, app: "com.c"))
        #expect(permissions.allows(.send, app: "com.a") && !permissions.allows(.send, app: "com.b"))
        #expect(permissions.allows(.tokens, app: "com.a") && !permissions.allows(.deadLetters, app: "com.a"))
        #expect(!permissions.allowsSome(.deadLetters) && permissions.allowsSome(.send))
        #expect(credentials.warnings.isEmpty)
        #expect(permissions.summary == "read (com.a, com.b), send (com.a), tokens (com.a, com.b)")

        let everywhere = try #require(try Self.parse(#""scopes": ["dead-letters"]"#).permissions(of: "alice"))
        #expect(everywhere.allows(.deadLetters, app: "anything") && !everywhere.allows(.read, app: "anything"))
        let admin = try #require(try Self.parse(#""scopes": ["admin"], "apps": ["com.a"]"#).permissions(of: "alice"))
        #expect(admin.allows(.tokens, app: "com.a") && !admin.allows(.tokens, app: "com.b"), "admin for named apps")
    }

    @Test func anEntryWithoutScopesIsAnAdminWithAWarning() throws {
        let credentials = try Self.parse(#""note": "old file""#)
        #expect(credentials.permissions(of: "alice") == .admin)
        #expect(credentials.warnings == [#"operators[0] (alice) has no scopes, so it may do everything (admin): give it "scopes" in ops.json"#])
        #expect(credentials.permissions(of: "nobody") == nil)
    }

    @Test func badScopesAndAppsAreNamed() throws {
        func message(_ entry: String) -> String {
            do {
                _ = try Self.parse(entry)
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(message(#""scopes": ["sned"]"#).contains(#"operators[0].scopes[0] "sned" is not a scope (read, send, tokens, dead-letters, admin"#))
        #expect(message(#""scopes": []"#).contains("operators[0].scopes is empty"))
        #expect(message(#""scopes": "read""#).contains("operators[0].scopes must be an array"))
        #expect(message(#""scopes": ["send:"]"#).contains("operators[0].scopes[0] names no app"))
        #expect(message(#""scopes": [1]"#).contains("operators[0].scopes[0] must be a string"))
        #expect(message(#""scopes": ["read"], "apps": []"#).contains("operators[0].apps is empty"))
        #expect(message(#""scopes": ["read"], "apps": [7]"#).contains("operators[0].apps[0] must be an app's bundle id"))
        let credentials = try Self.parse(#""scopes": ["read:com.typo"]"#)
        #expect(throws: OperatorsFileError.self) { try credentials.check(apps: ["com.a"]) }
        try credentials.check(apps: ["com.typo"])
    }
}

struct LoginThrottleTests {
    @Test func theBackoffStartsAfterFiveFailuresAndDoublesToAMinute() {
        #expect((0..<5).allSatisfy { LoginThrottle.backoff(failures: $0) == .zero })
        #expect(LoginThrottle.backoff(failures: 5) == .seconds(1))
        #expect(LoginThrottle.backoff(failures: 6) == .seconds(2))
        #expect(LoginThrottle.backoff(failures: 10) == .seconds(32))
        #expect(LoginThrottle.backoff(failures: 11) == .seconds(60))
        #expect(LoginThrottle.backoff(failures: Int.max) == .seconds(60), "no overflow")
    }

    @Test func aTryWaitsOnlyUntilTheBackoffAfterTheLastFailureEnds() {
        #expect(LoginThrottle.backoffRefusal(failures: 6, lastFailure: 10_000, now: 10_500) == .backoff(retryAfter: .milliseconds(1500)))
        #expect(LoginThrottle.backoffRefusal(failures: 6, lastFailure: 10_000, now: 12_000) == nil)
        #expect(LoginThrottle.backoffRefusal(failures: 4, lastFailure: 10_000, now: 10_000) == nil)
        #expect(LoginThrottle.backoffRefusal(failures: 6, lastFailure: 20_000, now: 10_000) == nil, "a clock that went back does not lock")
    }

    @Test func theLineOfChecksAdmitsInOrderAndTurnsAwayWhenFull() async {
        let queue = VerificationQueue(concurrent: 1, waiting: 2, patience: .seconds(5))
        // One runs (blocked until released), two wait, a fourth is turned away at once.
        async let first: Int? = queue.run {
            for _ in 0..<200 where !Task.isCancelled { usleep(5000) }
            return 1
        }
        try? await Task.sleep(for: .milliseconds(50))
        async let second: Int? = queue.run { 2 }
        async let third: Int? = queue.run { 3 }
        try? await Task.sleep(for: .milliseconds(50))
        let fourth = await queue.run { 4 }
        #expect(fourth == nil)
        let results = await [first, second, third]
        #expect(results == [1, 2, 3])
        #expect(queue.typicalCheck > .zero)

        let impatient = VerificationQueue(concurrent: 1, waiting: 2, patience: .milliseconds(100))
        // The slot is held 2 s, far beyond the patience, so a busy machine waking the timer late
        // still finds the line's patience run out first.
        async let busy: Int? = impatient.run {
            usleep(2_000_000)
            return 1
        }
        try? await Task.sleep(for: .milliseconds(20))
        let late = await impatient.run { 2 }
        #expect(late == nil, "its turn did not come within its patience")
        _ = await busy
    }
}
