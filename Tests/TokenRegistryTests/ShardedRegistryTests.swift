import Foundation
import PushCore
import Redis
import TestSupport
import Testing
import TokenRegistry

/// An app's registry over virtual shards (issue 14, item 3), and moving a single-tag registry there
/// online (`pushctl registry migrate`), against the shared test Redis.
@Suite("Sharded registry", .serialized, .timeLimit(.minutes(3)))
struct ShardedRegistryTests {
    /// Runs `body` with a client and an app of its own; removes the app's keys after.
    func withApp(_ name: String, _ body: (RedisClient, String) async throws -> Void) async throws {
        let redis = try await RegistryTesting.client()
        let app = RegistryTesting.uniqueApp(name)
        try await withCleanUp {
            try await body(redis, app)
        } cleanUp: {
            try await RegistryTesting.cleanUp(redis, app: app)
            await redis.close()
        }
    }

    @Test func theShardsTagsSitOneInEachEqualRangeOfTheSlotSpace() {
        for count in [2, 3, 24, 64] {
            let spread = RedisHashTagSpread(name: "com.example.game", count: count)
            for (index, tag) in spread.tags.enumerated() {
                let slot = RedisClusterSlot.slot(of: "push:{\(tag)}:tokens")
                #expect(slot >= index * 16384 / count && slot < (index + 1) * 16384 / count, "tag \(tag) of \(count): slot \(slot)")
                #expect(tag.hasPrefix("com.example.game#\(index)"))
            }
        }
        #expect(RedisHashTagSpread(name: "com.example.game", count: 1).tags == ["com.example.game"])
        // Three masters with redis-cli's even split hold 8 of 24 tags each.
        let slots = RedisHashTagSpread(name: "com.example.game", count: 24).tags.map { RedisClusterSlot.slot(of: "{\($0)}") }
        #expect([0..<5461, 5461..<10923, 10923..<16384].map { range in slots.filter { range.contains($0) }.count } == [8, 8, 8])
        // A device's shard is a stable hash of its token, the same in every process.
        let device = try! DeviceToken(normalizing: String(repeating: "ab", count: 32))
        #expect(RegistryLayout(shards: 24).shard(of: device) == RegistryLayout(shards: 24).shard(of: device))
        #expect(RegistryLayout.legacy.shard(of: device) == 0)
    }

    @Test func aNewRegistryGetsShardsAndOneWithSingleTagDataKeepsItsLayout() async throws {
        try await withApp("layout") { redis, app in
            let registry = TokenRegistry(redis: redis)
            let state = try await registry.layouts.state(app: app)
            #expect(state == .settled(RegistryLayout(shards: 24)))
            let stored = try await redis.execute("HGET", RegistryKeys.layoutKey(prefix: "push", app: app), "shards").string
            #expect(stored == "24")
        }
        try await withApp("layout-old") { redis, app in
            // A registry from before shards: its token set under `{app}`, no layout hash.
            try await redis.execute("SADD", RegistryLayout.legacy.keys(prefix: "push", app: app, shard: 0).tokens, String(repeating: "0", count: 64))
            #expect(try await TokenRegistry(redis: redis).layouts.state(app: app) == .settled(.legacy))
            #expect(
                try await TokenRegistry(redis: redis, layouts: RegistryLayouts(redis: redis, defaultShards: 8)).layouts.state(app: app)
                    == .settled(.legacy))
        }
    }

    @Test func devicesSpreadOverTheShardsAndEachLivesWhollyInItsOwn() async throws {
        try await withApp("spread") { redis, app in
            let registry = TokenRegistry(redis: redis)
            let prefix = TestTokens.randomPrefix()
            let tokens = (0..<480).map { RegistryTesting.token($0, prefix: prefix) }
            for (index, token) in tokens.enumerated() {
                _ = try await registry.upsert(
                    app: app, token: token, registration: DeviceRegistration(user: "user\(index % 4)", topics: ["news", "t\(index % 3)"]),
                    defaultEnvironment: .production, now: 1_000)
            }
            let counts = try await registry.tokenCounts(app: app)
            #expect(counts.count == 24)
            #expect(counts.reduce(0) { $0 + $1.tokens } == 480)
            #expect(counts.allSatisfy { $0.tokens >= 5 }, "every shard holds some: \(counts.map(\.tokens))")
            let sets = RegistrySets(shards: counts.map(\.keys))
            for (index, token) in tokens.enumerated() {
                // The record and every set naming the device are in the device's shard.
                let keys = try await registry.keys(app: app, device: token)
                #expect(try await redis.execute("EXISTS", keys.record(token)).integer == 1)
                #expect(try await redis.execute("SISMEMBER", keys.user("user\(index % 4)"), token.hex).integer == 1)
                #expect(try await redis.execute("SISMEMBER", keys.topic("t\(index % 3)"), token.hex).integer == 1)
                #expect(keys == sets.shard(of: token))
            }
            // A user's tokens are found in every shard's piece of the user's set.
            let alice = try await collect(try await registry.tokens(app: app, user: "user1"))
            #expect(Set(alice) == Set(tokens.enumerated().filter { $0.offset % 4 == 1 }.map(\.element)))
            #expect(try await redis.members(sets.topic("news")).count == 480)
            // Moving to another user is one script on the device's shard.
            _ = try await registry.upsert(
                app: app, token: tokens[1], registration: DeviceRegistration(user: "user2"), defaultEnvironment: .production, now: 2_000)
            #expect(try await redis.members(sets.user("user1")).count == 119)
            #expect(try await redis.members(sets.user("user2")).contains(tokens[1].hex))
        }
    }

    @Test func anInvalidLiveActivityTokenIsRemovedFromItsDevicesShard() async throws {
        try await withApp("activity") { redis, app in
            let registry = TokenRegistry(redis: redis)
            let device = RegistryTesting.token(1)
            // An activity token whose own shard is not its device's.
            let layout = RegistryLayout(shards: 24)
            let pushToken = (2..<200).lazy.map { RegistryTesting.token($0) }.first { layout.shard(of: $0) != layout.shard(of: device) }!
            _ = try await registry.upsert(
                app: app, token: device, registration: DeviceRegistration(user: "alice"), defaultEnvironment: .production, now: 1_000)
            _ = try await registry.upsertActivityToken(
                app: app, device: device,
                registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "Match"), pushToken: pushToken),
                defaultEnvironment: .production, now: 1_100)
            let sets = try await RegistrySets(registry: registry, app: app)
            #expect(try await redis.execute("EXISTS", sets.activityRecord(pushToken, device: device)).integer == 1)
            #expect(try await redis.members(sets.pushToStartTokens(attributesType: "Match")) == [pushToken.hex])

            let outcomes = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: pushToken, reason: "Unregistered", invalidSince: 1_200)], now: 1_300, noteLifetime: .seconds(60))
            #expect(outcomes.count == 1)
            guard case .success(.removed(let user)) = outcomes[0] else { throw TestFailure("not removed: \(outcomes[0])") }
            #expect(user == "alice")
            #expect(try await redis.execute("EXISTS", sets.activityRecord(pushToken, device: device)).integer == 0)
            #expect(try await redis.members(sets.pushToStartTokens(attributesType: "Match")).isEmpty)
            #expect(try await registry.record(app: app, token: device) != nil, "the device stays")
            // The same report again finds the removal note in the device's shard.
            let again = try await registry.removeIfNotRegistered(
                [InvalidTokenReport(app: app, token: pushToken, reason: "Unregistered", invalidSince: 1_200)], now: 1_400, noteLifetime: .seconds(60))
            guard case .success(.notFound(let earlier)) = again[0], let earlier else { throw TestFailure("no note: \(again[0])") }
            #expect(earlier.at == 1_300 && earlier.reason == "Unregistered")
        }
    }

    /// A single-tag registry (users, topics, Live Activity tokens, deleted devices) moves to 24
    /// shards while another registry writes to it with the layout it read before: nothing is lost,
    /// nothing deleted comes back, and the old layout's keys are gone.
    @Test func aSingleTagRegistryMovesToShardsWhileItIsWrittenTo() async throws {
        try await withApp("migrate") { redis, app in
            let old = RegistryTesting.registry(redis)
            let prefix = TestTokens.randomPrefix()
            let devices = (0..<600).map { RegistryTesting.token($0, prefix: prefix) }
            for (index, device) in devices.enumerated() {
                _ = try await old.upsert(
                    app: app, token: device, registration: DeviceRegistration(user: "u\(index % 10)", topics: ["all", "t\(index % 5)"]),
                    defaultEnvironment: .production, now: 1_000)
            }
            let activityTokens = (0..<20).map { RegistryTesting.token(10_000 + $0, prefix: prefix) }
            for (index, token) in activityTokens.enumerated() {
                _ = try await old.upsertActivityToken(
                    app: app, device: devices[index],
                    registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: "M"), pushToken: token),
                    defaultEnvironment: .production, now: 1_100)
            }
            let deleted = Array(devices[580...])
            for device in deleted { try await old.delete(app: app, token: device, at: 1_200) }
            #expect(try await old.layouts.state(app: app) == .settled(.legacy))

            // A service that read the layout before the migration and keeps it for a minute.
            let stale = TokenRegistry(redis: redis, layouts: RegistryLayouts(redis: redis, defaultShards: 1, cacheLifetime: .seconds(60)))
            #expect(try await stale.layouts.state(app: app) == .settled(.legacy))
            let migrator = TokenRegistry(redis: redis, layouts: RegistryLayouts(redis: redis, cacheLifetime: .milliseconds(50)))
            let writes = Task {
                // Writes while the migration runs: new devices, changed users, a deletion.
                for index in 0..<40 {
                    _ = try await stale.upsert(
                        app: app, token: RegistryTesting.token(20_000 + index, prefix: prefix), registration: DeviceRegistration(user: "new"),
                        defaultEnvironment: .production, now: 3_000)
                    _ = try await stale.upsert(
                        app: app, token: devices[index], registration: DeviceRegistration(user: "moved", topics: ["all"]),
                        defaultEnvironment: .production, now: 3_000)
                }
                try await stale.delete(app: app, token: devices[100], at: 3_000)
            }
            let report = try await migrator.migrate(app: app, to: RegistryLayout(shards: 24), concurrency: 8)
            try await writes.value
            #expect(report.from == .legacy)
            #expect(report.devices > 0 && report.passes >= 1)
            #expect(try await migrator.layouts.state(app: app) == .settled(RegistryLayout(shards: 24)))

            let fresh = TokenRegistry(redis: redis)
            let sets = try await RegistrySets(registry: fresh, app: app)
            #expect(sets.shards.count == 24)
            // Every live device is there once, with what was written last.
            let live = Set(devices[..<580].map(\.hex)).subtracting([devices[100].hex])
                .union((0..<40).map { RegistryTesting.token(20_000 + $0, prefix: prefix).hex })
            #expect(Set(try await redis.members(sets.tokens)) == live)
            #expect(try await redis.members(sets.user("moved")).count == 40)
            #expect(try await redis.members(sets.user("new")).count == 40)
            #expect(try await redis.members(sets.user("u0")).count == 53, "u0 had 58 (0, 10, … 570): 4 moved to another user, 100 deleted")
            #expect(try await fresh.record(app: app, token: devices[5])?.user == "moved")
            #expect(try await fresh.record(app: app, token: devices[500])?.topics == ["all", "t0"])
            #expect(try await redis.members(sets.pushToStartTokens(attributesType: "M")).count == 20)
            // Deleted devices stay deleted: their tombstones moved too.
            for device in deleted + [devices[100]] {
                #expect(try await fresh.record(app: app, token: device) == nil)
                let late = try await fresh.upsert(
                    app: app, token: device, registration: DeviceRegistration(user: "late"), defaultEnvironment: .production, now: 1_150)
                #expect(!late.applied, "a registration older than the deletion does not revive it")
            }
            // Nothing is left under the old layout's tag but its layout hash.
            let leftovers = try await redis.execute("KEYS", "push:{\(app)}:*").array?.compactMap(\.string) ?? []
            #expect(leftovers == [RegistryKeys.layoutKey(prefix: "push", app: app)], "\(leftovers.prefix(5))")
            // Running it again finds nothing to do.
            let again = try await migrator.migrate(app: app, to: RegistryLayout(shards: 24))
            #expect(again.from == nil)
        }
    }

    /// The single-tag layout's scripts refuse a write once a migration started; the registry then
    /// reads the layout again and writes in the new one.
    @Test func aStaleWriterIsTurnedAwayFromTheOldLayout() async throws {
        try await withApp("fence") { redis, app in
            let stale = TokenRegistry(redis: redis, layouts: RegistryLayouts(redis: redis, defaultShards: 1, cacheLifetime: .seconds(60)))
            let device = RegistryTesting.token(1)
            _ = try await stale.upsert(app: app, token: device, registration: DeviceRegistration(user: "a"), defaultEnvironment: .production, now: 1)
            try await redis.execute("HSET", RegistryKeys.layoutKey(prefix: "push", app: app), "shards", "24", "from", "1")
            _ = try await stale.upsert(app: app, token: device, registration: DeviceRegistration(user: "b"), defaultEnvironment: .production, now: 2)
            #expect(try await stale.layouts.state(app: app) == .migrating(from: .legacy, to: RegistryLayout(shards: 24)))
            let keys = RegistryLayout(shards: 24).keys(prefix: "push", app: app, device: device)
            #expect(try await redis.execute("HGET", keys.record(device), "user").string == "b", "written in the new layout")
            #expect(try await redis.execute("EXISTS", RegistryTesting.keys(app).record(device)).integer == 0, "moved out of the old one")
        }
    }
}
