import Foundation
import Logging
import TestSupport
import Testing

@testable import Redis

/// The client against a real Redis Cluster (`scripts/redis-cluster.sh`: 3 masters with a replica
/// each on 127.0.0.1:6541-6546, node timeout 2 s): routing, pipelines over every master, a migrating
/// slot (`ASK`, then `MOVED`), and a master killed while writes go on.
@Suite(.serialized, .timeLimit(.minutes(3))) struct RedisClusterTests {
    static let cluster = LocalCluster(.redis, name: "redis-cluster-test", port: 6541)
    static let logger = TestLogger.make("redis-cluster")

    /// Each node as `scripts/redis-cluster.sh nodes` sees it.
    struct Node {
        let index: Int
        let port: Int
        let role: String
        let slots: [ClosedRange<Int>]
    }

    static func nodes() async throws -> [Node] {
        try await cluster.script("nodes").split(whereSeparator: \.isNewline).compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 3, let index = Int(fields[0]), let port = Int(fields[1]) else { return nil }
            let slots = fields[3...].compactMap { range -> ClosedRange<Int>? in
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                return bounds.isEmpty ? nil : bounds[0]...(bounds.count > 1 ? bounds[1] : bounds[0])
            }
            return Node(index: index, port: port, role: fields[2], slots: fields[2] == "master" ? slots : [])
        }
    }

    static func direct(_ port: Int) async throws -> RedisConnection {
        try await RedisConnection.connect(configuration: RedisConfiguration(url: "redis://127.0.0.1:\(port)"), logger: logger)
    }

    static func withClient<T>(_ body: (RedisClient) async throws -> T) async throws -> T {
        try await cluster.start()
        let url = try await cluster.url()
        let client = try await RedisClient.connect(configuration: RedisConfiguration(url: url + "?command_timeout_ms=1000"), logger: logger)
        return try await withCleanUp {
            try await body(client)
        } cleanUp: {
            await client.close()
        }
    }

    @Test func commandsPipelinesAndScriptsReachEveryMaster() async throws {
        try await Self.withClient { client in
            #expect(client.clusterSlotsPerMaster.count == 3)
            #expect(client.clusterSlotsPerMaster.values.reduce(0, +) == 16384)
            let prefix = TestServers.uniqueName("cluster")
            let keys = (0..<600).map { "\(prefix):\($0)" }
            // One pipeline of 600 SETs spans every master; the replies come back in order.
            let set = try await client.pipeline(keys.map { RedisCommand(["SET", $0, "v-\($0)", "EX", "60"]) })
            #expect(set.allSatisfy { $0 == .status("OK") })
            let got = try await client.pipeline(keys.map { RedisCommand(["GET", $0]) })
            #expect(got.map { $0.string ?? "" } == keys.map { "v-\($0)" })
            // Every master holds some of them.
            for node in try await Self.nodes() where node.role == "master" {
                let connection = try await Self.direct(node.port)
                let held = try await connection.pipeline(keys.map { RedisCommand(["EXISTS", $0]) }).compactMap(\.integer).reduce(0, +)
                // A master answers MOVED for keys it does not hold, which are not integers.
                #expect(held > 100, "master \(node.port) holds \(held) of 600")
                await connection.close()
            }
            // A script touches several keys of one hash tag atomically on their master.
            let tag = "{\(prefix)}"
            let script = RedisScript("redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('GET', KEYS[1])")
            let reply = try await client.evalScript(script, keys: ["\(tag):a", "\(tag):b"], args: ["together"])
            #expect(reply.string == "together")
            #expect(try await client.execute("GET", "\(tag):b").string == "together")
            // A keyless command routed by a key runs on that key's master.
            let info = try await client.execute(RedisCommand(["INFO", "server"]).routed(byKey: "\(tag):a")).string ?? ""
            let slot = RedisClusterSlot.slot(of: "\(tag):a")
            let owner = try #require(try await Self.nodes().first { node in node.slots.contains { $0.contains(slot) } })
            #expect(info.contains("tcp_port:\(owner.port)"))
        }
    }

    /// Keys in many slots, as the crash guard's marks are: one script a key, since a script's keys
    /// must share a slot here (one script for all of them failed with CROSSSLOT).
    @Test func deleteKeysIfValueIsWorksOnKeysInEverySlot() async throws {
        try await Self.withClient { client in
            #expect(!client.keysShareOneNode)
            let prefix = TestServers.uniqueName("compare-and-delete")
            let keys = (0..<60).map { "\(prefix):\($0)" }
            #expect(Set(keys.map { RedisClusterSlot.slot(of: $0) }).count > 50)
            for reply in try await client.pipeline(keys.map { ["SET", $0, "mine", "EX", "60"] }) { _ = try reply.throwingServerError() }
            try await client.execute("SET", keys[7], "theirs", "EX", "60")
            #expect(try await client.deleteKeys(keys, ifValueIs: "mine") == 59)
            let left = try await client.pipeline(keys.map { ["EXISTS", $0] }).compactMap(\.integer).reduce(0, +)
            #expect(left == 1)
            #expect(try await client.execute("GET", keys[7]).string == "theirs")
            try await client.execute("DEL", keys[7])
        }
    }

    /// Moves whatever the slot holds, not only this test's keys: other tests' keys (60 s TTLs) can
    /// share the slot, and a node refuses to give up a slot it still holds keys in.
    static func migrateEveryKey(inSlot slot: Int, from source: RedisConnection, toPort port: Int) async throws {
        for _ in 0..<100 {
            let keys = try await source.execute("CLUSTER", "GETKEYSINSLOT", String(slot), "100").array?.compactMap(\.string) ?? []
            if keys.isEmpty { return }
            _ = try await source.execute(RedisCommand(["MIGRATE", "127.0.0.1", String(port), "", "0", "5000", "KEYS"] + keys)).throwingServerError()
        }
        Issue.record("slot \(slot) still holds keys after 100 rounds of MIGRATE")
    }

    @Test func aMigratingSlotIsFollowedThroughAskThenMoved() async throws {
        try await Self.withClient { client in
            let tag = TestServers.uniqueName("migrate")
            let staying = "{\(tag)}:staying"
            let moved = "{\(tag)}:moved"
            try await client.execute("SET", staying, "one")
            try await client.execute("SET", moved, "two")
            let slot = RedisClusterSlot.slot(of: staying)
            // A key of no hash tag that happens to share the slot, as other tests' keys can.
            let neighbour = try #require((0..<1_000_000).lazy.map { "\(tag)-neighbour-\($0)" }.first { RedisClusterSlot.slot(of: $0) == slot })
            try await client.execute("SET", neighbour, "three", "EX", "60")
            let masters = try await Self.nodes().filter { $0.role == "master" }
            let source = try #require(masters.first { node in node.slots.contains { $0.contains(slot) } })
            let target = try #require(masters.first { $0.port != source.port })
            let from = try await Self.direct(source.port)
            let to = try await Self.direct(target.port)
            let sourceID = try #require(try await from.execute("CLUSTER", "MYID").string)
            let targetID = try #require(try await to.execute("CLUSTER", "MYID").string)
            try await to.execute("CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID)
            try await from.execute("CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID)
            try await from.execute("MIGRATE", "127.0.0.1", String(target.port), moved, "0", "5000")
            // Mid-migration: the moved key is answered by the target after ASK, the other by the source.
            #expect(try await client.execute("GET", moved).string == "two")
            #expect(try await client.execute("GET", staying).string == "one")
            let pipelined = try await client.pipeline([["GET", moved], ["GET", staying]])
            #expect(pipelined.map { $0.string } == ["two", "one"])
            // Finished: the slot belongs to the target, and the client learns so from MOVED.
            try await Self.migrateEveryKey(inSlot: slot, from: from, toPort: target.port)
            for connection in [to, from] { try await connection.execute("CLUSTER", "SETSLOT", String(slot), "NODE", targetID) }
            #expect(try await client.execute("GET", staying).string == "one")
            #expect(try await client.execute("GET", neighbour).string == "three")
            try await eventually("the client's map names the new master") {
                let value = try await client.execute("GET", moved).string
                return value == "two" && (client.clusterSlotsPerMaster[RedisEndpoint(host: "127.0.0.1", port: target.port)] ?? 0) > 5461
            }
            // Give the slot back, so the cluster stays as created.
            try await from.execute("CLUSTER", "SETSLOT", String(slot), "IMPORTING", targetID)
            try await to.execute("CLUSTER", "SETSLOT", String(slot), "MIGRATING", sourceID)
            try await Self.migrateEveryKey(inSlot: slot, from: to, toPort: source.port)
            for connection in [from, to] { try await connection.execute("CLUSTER", "SETSLOT", String(slot), "NODE", sourceID) }
            #expect(try await client.execute("GET", neighbour).string == "three")
            try await client.execute("DEL", staying, moved)
            try await client.execute("DEL", neighbour)
            await from.close()
            await to.close()
        }
    }

    @Test func aKilledMastersReplicaTakesOverAndAcknowledgedWritesStay() async throws {
        try await Self.withClient { client in
            let prefix = TestServers.uniqueName("failover")
            let kept = (0..<900).map { "\(prefix):kept:\($0)" }
            let keys = (0..<900).map { "\(prefix):during:\($0)" }
            _ = try await client.pipeline(kept.map { RedisCommand(["SET", $0, "before"]) })
            // Acknowledged by a replica too (what the cluster keeps through a failover).
            let masters = try await Self.nodes().filter { $0.role == "master" }
            for master in masters {
                let connection = try await Self.direct(master.port)
                #expect(try await connection.execute("WAIT", "1", "2000").integer == 1)
                await connection.close()
            }
            // A client that issues no command at all through the failover (an idle service).
            let idle = try await RedisClient.connect(configuration: RedisConfiguration(url: try await Self.cluster.url()), logger: Self.logger)
            try await eventually("the idle client is ready", timeout: .seconds(10)) { idle.isConnected }
            let victim = masters[0]
            let killedAt = ContinuousClock.now
            try await Self.cluster.killNode(victim.index)
            // One pipeline over every master while one cannot be reached: the part for it goes
            // again once the map is read again, and the parts the others ran do not run twice.
            let counters = (0..<300).map { "\(prefix):counter:\($0)" }
            let counted = try? await client.pipeline(counters.map { RedisCommand(["INCR", $0]) })
            // Writes go on; those that fail (the victim's slots, until its replica is promoted) are
            // retried, as the services retry Redis while it is unavailable.
            var failures = 0
            var lastError = ""
            for (index, key) in keys.enumerated() {
                var written = false
                for _ in 0..<60 where !written {
                    do {
                        try await client.execute("SET", key, "after-\(index)")
                        written = true
                    } catch let error as RedisError {
                        #expect(error.isRetryable, "\(error)")
                        failures += 1
                        lastError = error.message
                        try await Task.sleep(for: .milliseconds(200))
                    }
                }
                #expect(written, "\(key) was never written: \(lastError)")
            }
            let recovered = ContinuousClock.now - killedAt
            let values = try await client.pipeline(keys.map { RedisCommand(["GET", $0]) })
            #expect(values.enumerated().allSatisfy { $0.element.string == "after-\($0.offset)" })
            let counts = try await client.pipeline(counters.map { RedisCommand(["GET", $0]) }).map { Int($0.string ?? "0") ?? -1 }
            for (key, count) in zip(counters, counts) {
                let slot = RedisClusterSlot.slot(of: key)
                let onVictim = victim.slots.contains { $0.contains(slot) }
                // The victim's part either went to its promoted replica (1) or was never sent (0).
                let expected: ClosedRange<Int> = counted != nil ? 1...1 : onVictim ? 0...1 : 1...1
                #expect(expected.contains(count), "\(key) (slot \(slot), on the killed master: \(onVictim)) counted \(count) times")
            }
            let keptValues = try await client.pipeline(kept.map { RedisCommand(["GET", $0]) })
            #expect(keptValues.allSatisfy { $0.string == "before" }, "a write the replica acknowledged was lost")
            let promoted = try await Self.nodes().filter { $0.role == "master" }
            #expect(promoted.count == 3 && !promoted.contains { $0.index == victim.index })
            // The idle client reads the map again on its own once its old master is gone: ready again.
            try await eventually("the idle client is ready again", timeout: .seconds(20)) { idle.isConnected }
            await idle.close()
            print(
                "redis failover: master \(victim.port) killed, 900 keys written during the failover within \(recovered), \(failures) retried writes")
            try await Self.cluster.startNode(victim.index)
            try await Self.cluster.script("wait")
        }
    }
}
