import Foundation
import PushCore
import Redis
import TestSupport
import Testing
import TokenRegistry

/// Against the shared test Redis (`TestServers.redisURL`); fails when it is not running. Each test
/// uses its own app id, so its `{app}` keys are its own, and deletes them at the end.
@Suite("Token registry against a real Redis", .timeLimit(.minutes(2)))
struct TokenRegistryTests {
    let alice = DeviceRegistration(
        user: "alice",
        locale: "zh-Hant-TW",
        environment: .sandbox,
        topics: ["news", "sports"],
        device: DeviceInfo(uuid: "UUID-1", name: "Alice's iPhone", model: "iPhone15,2", osVersion: "17.4", appVersion: "2.1"),
        settings: NotificationSettings(alert: true, badge: false, sound: true)
    )

    @Test func firstUpsertCreatesAndLaterOnesUpdateKeepingRegisteredAt() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("upsert")
        let token = RegistryTesting.token(1)

        let first = try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 1_000)
        #expect(first.created)
        #expect(first.record.registeredAt == 1_000)
        #expect(first.record.updatedAt == 1_000)
        #expect(first.record.environment == .sandbox)
        #expect(try await registry.record(app: app, token: token) == first.record)

        // Without an environment the app's default applies; registered_at stays, updated_at moves.
        var update = alice
        update.environment = nil
        update.locale = nil
        update.device = DeviceInfo()
        let second = try await registry.upsert(app: app, token: token, registration: update, defaultEnvironment: .production, now: 2_500)
        #expect(!second.created)
        #expect(second.record.registeredAt == 1_000)
        #expect(second.record.updatedAt == 2_500)
        #expect(second.record.environment == .production)
        let stored = try #require(try await registry.record(app: app, token: token))
        #expect(stored == second.record)
        // The newest registration wins whole: fields it leaves out are gone.
        #expect(stored.locale == nil)
        #expect(stored.device == DeviceInfo())
        #expect(stored.settings == alice.settings)

        // The hash is laid out as documented.
        let keys = RegistryTesting.keys(app)
        #expect(keys.record(token) == "push:{\(app)}:token:\(token.hex)")
        let hash = try await redis.execute("HGETALL", keys.record(token)).array?.compactMap(\.string) ?? []
        var fields: [String: String] = [:]
        for index in stride(from: 0, to: hash.count - 1, by: 2) { fields[hash[index]] = hash[index + 1] }
        #expect(
            fields == [
                "user": "alice", "environment": "production", "topics": #"["news","sports"]"#,
                "alert": "1", "badge": "0", "sound": "1", "registered_at": "1000", "updated_at": "2500",
            ]
        )
        #expect(try await RegistryTesting.members(redis, keys.tokens) == [token.hex])

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    @Test func aTokenThatMovesToAnotherUserLeavesTheOldUsersSet() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("move")
        let keys = RegistryTesting.keys(app)
        let token = RegistryTesting.token(2)
        let other = RegistryTesting.token(3)

        _ = try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 1)
        _ = try await registry.upsert(app: app, token: other, registration: alice, defaultEnvironment: .production, now: 1)
        #expect(try await RegistryTesting.members(redis, keys.user("alice")) == [token.hex, other.hex].sorted())

        var bob = alice
        bob.user = "bob"
        _ = try await registry.upsert(app: app, token: token, registration: bob, defaultEnvironment: .production, now: 2)
        #expect(try await RegistryTesting.members(redis, keys.user("alice")) == [other.hex])
        #expect(try await RegistryTesting.members(redis, keys.user("bob")) == [token.hex])
        #expect(try await collect(try await registry.tokens(app: app, user: "bob")) == [token])

        // A registration without a user leaves every user set.
        var anonymous = alice
        anonymous.user = nil
        _ = try await registry.upsert(app: app, token: token, registration: anonymous, defaultEnvironment: .production, now: 3)
        #expect(try await !RegistryTesting.exists(redis, keys.user("bob")))
        #expect(try await registry.record(app: app, token: token)?.user == nil)

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    @Test func droppedTopicsLeaveTheirSets() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("topics")
        let keys = RegistryTesting.keys(app)
        let token = RegistryTesting.token(4)

        _ = try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 1)
        var changed = alice
        changed.topics = ["sports", "weather", "ünïcode \"quoted\"".replacingOccurrences(of: " ", with: "-")]
        _ = try await registry.upsert(app: app, token: token, registration: changed, defaultEnvironment: .production, now: 2)
        #expect(try await !RegistryTesting.exists(redis, keys.topic("news")))
        for topic in changed.topics {
            #expect(try await RegistryTesting.members(redis, keys.topic(topic)) == [token.hex], "\(topic)")
            #expect(try await collect(try await registry.tokens(app: app, topic: topic)) == [token])
        }
        #expect(try await registry.record(app: app, token: token)?.topics == changed.topics)

        changed.topics = []
        _ = try await registry.upsert(app: app, token: token, registration: changed, defaultEnvironment: .production, now: 3)
        for topic in ["news", "sports", "weather"] {
            #expect(try await !RegistryTesting.exists(redis, keys.topic(topic)), "\(topic)")
        }

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    /// The newest event wins whatever order writes arrive in: an older upsert or delete changes
    /// nothing, a deletion (also an invalid-token removal) leaves a tombstone an older registration
    /// cannot pass, and a tie between a registration and a deletion goes to the deletion.
    @Test func writesApplyInEventOrder() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("order")
        let keys = RegistryTesting.keys(app)
        let token = RegistryTesting.token(9)
        let bob = DeviceRegistration(user: "bob", topics: ["sports"])

        #expect(try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 2_000).applied)
        let older = try await registry.upsert(app: app, token: token, registration: bob, defaultEnvironment: .production, now: 1_000)
        #expect(!older.applied && !older.created)
        #expect(try await registry.record(app: app, token: token)?.user == "alice")
        #expect(try await RegistryTesting.members(redis, keys.user("bob")).isEmpty)
        #expect(try await !registry.delete(app: app, token: token, at: 1_500), "a delete older than the registration keeps it")
        #expect(try await registry.record(app: app, token: token)?.updatedAt == 2_000)

        #expect(try await registry.delete(app: app, token: token, at: 3_000))
        #expect(try await registry.deletedAt(app: app, token: token) == 3_000)
        for at: Int64 in [2_500, 3_000] {
            #expect(try await !registry.upsert(app: app, token: token, registration: bob, defaultEnvironment: .production, now: at).applied)
        }
        #expect(try await registry.record(app: app, token: token) == nil)
        #expect(try await RegistryTesting.members(redis, keys.tokens).isEmpty)
        // An older delete does not move the tombstone back.
        #expect(try await !registry.delete(app: app, token: token, at: 2_000))
        #expect(try await registry.deletedAt(app: app, token: token) == 3_000)

        let again = try await registry.upsert(app: app, token: token, registration: bob, defaultEnvironment: .production, now: 3_500)
        #expect(again.applied && again.created && again.record.registeredAt == 3_500)
        #expect(try await registry.deletedAt(app: app, token: token) == nil)

        // APNs called it invalid at 4,000: removed, and a registration from before that stays out.
        guard case .removed = try await registry.deleteIfNotRegistered(since: 4_000, app: app, token: token) else {
            Issue.record("a token registered before APNs called it invalid is removed")
            return
        }
        #expect(try await registry.deletedAt(app: app, token: token) == 4_000)
        #expect(try await !registry.upsert(app: app, token: token, registration: bob, defaultEnvironment: .production, now: 3_900).applied)
        #expect(try await registry.upsert(app: app, token: token, registration: bob, defaultEnvironment: .production, now: 4_100).applied)

        try await RegistryTesting.cleanUp(redis, app: app)
    }

    @Test func deleteRemovesTheRecordAndEverySetMembership() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("delete")
        let keys = RegistryTesting.keys(app)
        let token = RegistryTesting.token(5)
        let survivor = RegistryTesting.token(6)

        _ = try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 1)
        _ = try await registry.upsert(app: app, token: survivor, registration: alice, defaultEnvironment: .production, now: 1)
        #expect(try await registry.delete(app: app, token: token, at: 2))
        #expect(try await registry.record(app: app, token: token) == nil)
        #expect(try await !RegistryTesting.exists(redis, keys.record(token)))
        for key in [keys.user("alice"), keys.topic("news"), keys.topic("sports"), keys.tokens] {
            #expect(try await RegistryTesting.members(redis, key) == [survivor.hex], "\(key)")
        }
        // Deleting again is harmless and says there was nothing.
        #expect(try await !registry.delete(app: app, token: token, at: 2))

        #expect(try await registry.delete(app: app, token: survivor, at: 2))
        let left = try await redis.execute("EXISTS", keys.user("alice"), keys.topic("news"), keys.topic("sports"), keys.tokens)
        #expect(left == .integer(0))

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    @Test func deleteIfNotRegisteredFollowsTheInvalidTokenRule() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("invalid")
        let keys = RegistryTesting.keys(app)
        let stale = RegistryTesting.token(7)
        let fresh = RegistryTesting.token(8)
        let exact = RegistryTesting.token(9)

        let staleRecord = try await registry.upsert(app: app, token: stale, registration: alice, defaultEnvironment: .production, now: 1_000).record
        _ = try await registry.upsert(app: app, token: fresh, registration: alice, defaultEnvironment: .production, now: 1_000)
        _ = try await registry.upsert(app: app, token: fresh, registration: alice, defaultEnvironment: .production, now: 5_000)
        _ = try await registry.upsert(app: app, token: exact, registration: alice, defaultEnvironment: .production, now: 3_000)

        // APNs called the tokens dead at 3000: the one registered at 1000 goes, with its sets…
        #expect(try await registry.deleteIfNotRegistered(since: 3_000, app: app, token: stale) == .removed(staleRecord))
        #expect(try await registry.record(app: app, token: stale) == nil)
        for key in [keys.user("alice"), keys.topic("news"), keys.topic("sports"), keys.tokens] {
            #expect(try await !RegistryTesting.members(redis, key).contains(stale.hex), "\(key)")
        }
        // …the one registered again at 5000 stays, untouched…
        #expect(try await registry.deleteIfNotRegistered(since: 3_000, app: app, token: fresh) == .keptRegisteredAfter(5_000))
        #expect(try await registry.record(app: app, token: fresh)?.updatedAt == 5_000)
        #expect(try await RegistryTesting.members(redis, keys.user("alice")).contains(fresh.hex))
        // …one updated exactly at 3000 was not registered *after* it, so it goes…
        if case .removed(let record) = try await registry.deleteIfNotRegistered(since: 3_000, app: app, token: exact) {
            #expect(record.updatedAt == 3_000)
        } else {
            Issue.record("a token updated exactly at the invalid-token timestamp should be removed")
        }
        // …and an unknown or already removed token is not found.
        #expect(try await registry.deleteIfNotRegistered(since: 3_000, app: app, token: stale) == .notFound)
        #expect(try await registry.deleteIfNotRegistered(since: 3_000, app: app, token: RegistryTesting.token(10)) == .notFound)

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    @Test func streamingFiveThousandTokensYieldsEachExactlyOnceInBatches() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("stream")
        let keys = RegistryTesting.keys(app)
        let prefix = TestTokens.randomPrefix()
        let tokens = (0..<5_000).map { RegistryTesting.token($0, prefix: prefix) }
        for chunk in stride(from: 0, to: tokens.count, by: 1_000) {
            let members = tokens[chunk..<min(chunk + 1_000, tokens.count)].map(\.hex)
            try await redis.execute(RedisCommand(["SADD", keys.tokens] + members))
        }

        var seen: [DeviceToken] = []
        var batches = 0
        var largest = 0
        for try await batch in try await registry.tokens(app: app) {
            #expect(!batch.isEmpty)
            batches += 1
            largest = max(largest, batch.count)
            seen.append(contentsOf: batch)
        }
        #expect(seen.count == tokens.count)
        #expect(Set(seen) == Set(tokens))
        #expect(batches >= 5, "expected several SSCAN pages, got \(batches)")
        #expect(largest < 2 * TokenRegistry.scanBatchSize, "a batch of \(largest) tokens")

        // A set that does not exist yields nothing.
        #expect(try await collect(try await registry.tokens(app: app, topic: "nobody-subscribed")).isEmpty)

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    @Test func aHandWrittenBadRecordIsReportedAsCorruptNamingTheField() async throws {
        let redis = try await RegistryTesting.client()
        let registry = RegistryTesting.registry(redis)
        let app = RegistryTesting.uniqueApp("corrupt")
        let keys = RegistryTesting.keys(app)
        let token = RegistryTesting.token(11)
        let key = keys.record(token)
        let good = [
            "environment", "production", "topics", "[]", "alert", "1", "badge", "1", "sound", "1",
            "registered_at", "1", "updated_at", "1",
        ]
        try await redis.execute(RedisCommand(["HSET", key] + good))
        #expect(try await registry.record(app: app, token: token)?.environment == .production)

        let cases: [(field: String, value: String?)] = [
            ("environment", "staging"), ("alert", "yes"), ("topics", "news"), ("topics", #"[1]"#),
            ("updated_at", "yesterday"), ("registered_at", nil),
        ]
        for (field, value) in cases {
            try await redis.execute("DEL", key)
            try await redis.execute(RedisCommand(["HSET", key] + good))
            if let value {
                try await redis.execute("HSET", key, field, value)
            } else {
                try await redis.execute("HDEL", key, field)
            }
            let error = await #expect(throws: RegistryError.self) {
                try await registry.record(app: app, token: token)
            }
            #expect(error?.code == .corruptRecord, "\(field)")
            #expect(error?.key == key, "\(field)")
            #expect(error?.field == field, "\(field)")
            // The message names the key and field, but never the whole token (messages end up in logs).
            let message = error?.message ?? ""
            #expect(message.contains("push:{\(app)}:token:\(token.hex.prefix(8))…") && message.contains(field), "\(message)")
            #expect(!message.contains(token.hex), "\(message)")
            #expect(error?.isRetryable == false)
        }

        // A corrupt record is replaced whole by the next registration.
        _ = try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 7)
        #expect(try await registry.record(app: app, token: token)?.user == "alice")

        // A record key of the wrong type is corrupt too, for writes as well as reads.
        try await redis.execute("DEL", key)
        try await redis.execute("SET", key, "not a hash")
        for operation in ["upsert", "record"] {
            let error = await #expect(throws: RegistryError.self, "\(operation)") {
                if operation == "upsert" {
                    _ = try await registry.upsert(app: app, token: token, registration: alice, defaultEnvironment: .production, now: 8)
                } else {
                    _ = try await registry.record(app: app, token: token)
                }
            }
            #expect(error?.code == .corruptRecord, "\(operation): \(error?.message ?? "")")
            #expect(error?.key == key, "\(operation)")
        }

        // A set member that is not a token stops a scan with a clear error instead of a bad push.
        try await redis.execute("SADD", keys.topic("bad"), "not-a-token")
        let scanError = await #expect(throws: RegistryError.self) {
            _ = try await collect(try await registry.tokens(app: app, topic: "bad"))
        }
        #expect(scanError?.code == .corruptRecord)
        #expect(scanError?.message.contains(keys.topic("bad")) == true)

        try await RegistryTesting.cleanUp(redis, app: app)
        await redis.close()
    }

    /// 50 upserts of one token at once, from four clients, alternating users and topics: whichever
    /// wins, every set the token is in matches the final record exactly.
    @Test func concurrentUpsertsOfOneTokenLeaveConsistentSets() async throws {
        let clients = try await withThrowingTaskGroup(of: RedisClient.self) { group in
            for _ in 0..<4 { group.addTask { try await RegistryTesting.client() } }
            var clients: [RedisClient] = []
            for try await client in group { clients.append(client) }
            return clients
        }
        let app = RegistryTesting.uniqueApp("concurrent")
        let token = RegistryTesting.token(12)
        // The default (sharded) layout: four registries, each with its own layout cache, agree on it.
        let keys = try await TokenRegistry(redis: clients[0]).keys(app: app, device: token)
        #expect(keys.tag.hasPrefix(app + "#"))
        let users = ["u0", "u1", "u2", "u3", "u4"]
        let topicPool = ["t0", "t1", "t2", "t3", "t4", "t5"]

        var firstRegisteredAt: Int64?
        for round in 0..<3 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<50 {
                    let registry = TokenRegistry(redis: clients[index % clients.count])
                    var registration = DeviceRegistration(user: users[index % users.count])
                    if index % 7 == 0 { registration.user = nil }
                    registration.topics = topicPool.enumerated().filter { ($0.offset + index) % 3 == 0 }.map(\.element)
                    let now = Int64(round * 100 + index)
                    group.addTask {
                        _ = try await registry.upsert(app: app, token: token, registration: registration, defaultEnvironment: .production, now: now)
                    }
                }
                try await group.waitForAll()
            }

            let record = try #require(try await TokenRegistry(redis: clients[0]).record(app: app, token: token))
            for user in users {
                let isMember = try await RegistryTesting.members(clients[0], keys.user(user)).contains(token.hex)
                #expect(isMember == (record.user == user), "round \(round): user \(user), record says \(record.user ?? "none")")
            }
            for topic in topicPool {
                let isMember = try await RegistryTesting.members(clients[0], keys.topic(topic)).contains(token.hex)
                #expect(isMember == record.topics.contains(topic), "round \(round): topic \(topic), record says \(record.topics)")
            }
            #expect(try await RegistryTesting.members(clients[0], keys.tokens) == [token.hex])
            // registered_at is the first upsert's of round 0, for good; updated_at is one of this round's.
            #expect((0..<50).contains(record.registeredAt))
            if let firstRegisteredAt { #expect(record.registeredAt == firstRegisteredAt) }
            firstRegisteredAt = record.registeredAt
            #expect((Int64(round * 100)..<Int64(round * 100 + 50)).contains(record.updatedAt))
        }

        try await RegistryTesting.cleanUp(clients[0], app: app)
        for client in clients { await client.close() }
    }

    @Test func anUnreachableRedisIsUnavailableWithinTheCommandTimeout() async throws {
        // Port 1 on loopback: nothing listens, so connecting is refused and retried until the timeout.
        let configuration = try RedisConfiguration(url: "redis://127.0.0.1:1/0?connect_timeout_ms=300&command_timeout_ms=500&pool_size=1")
        let redis = RedisClient(configuration: configuration, logger: RegistryTesting.logger)
        let registry = RegistryTesting.registry(redis)
        let token = RegistryTesting.token(13)

        let operations: [(String, @Sendable () async throws(RegistryError) -> Void)] = [
            (
                "upsert",
                { () throws(RegistryError) in
                    _ = try await registry.upsert(
                        app: "com.test.down", token: token, registration: DeviceRegistration(), defaultEnvironment: .production, now: 1)
                }
            ),
            ("record", { () throws(RegistryError) in _ = try await registry.record(app: "com.test.down", token: token) }),
            ("delete", { () throws(RegistryError) in _ = try await registry.delete(app: "com.test.down", token: token, at: 1) }),
            ("scan", { () throws(RegistryError) in for try await _ in try await registry.tokens(app: "com.test.down") {} }),
        ]
        for (name, operation) in operations {
            let started = ContinuousClock.now
            let error = await #expect(throws: RegistryError.self, "\(name)") { try await operation() }
            let elapsed = ContinuousClock.now - started
            #expect(error?.code == .unavailable, "\(name): \(error?.message ?? "")")
            #expect(error?.isRetryable == true)
            #expect(error?.message.contains("127.0.0.1:1") == true, "\(name): \(error?.message ?? "")")
            // Bounded by the command timeout plus at most one connect timeout.
            #expect(elapsed < .seconds(3), "\(name) took \(elapsed)")
        }
        await redis.close()
    }
}

/// Every token of a stream, in order.
func collect(_ batches: TokenBatches) async throws(RegistryError) -> [DeviceToken] {
    var tokens: [DeviceToken] = []
    for try await batch in batches { tokens.append(contentsOf: batch) }
    return tokens
}
