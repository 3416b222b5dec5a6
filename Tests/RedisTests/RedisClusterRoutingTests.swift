import Testing

@testable import Redis

/// The pure parts of the Redis Cluster client: slots, routing keys, the slot map, redirects, URLs.
@Suite struct RedisClusterRoutingTests {
    @Test func slotsAreRedisOwn() {
        // The CRC16 check value of the XMODEM variant, and slots redis-cli's CLUSTER KEYSLOT gives.
        #expect(RedisClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisClusterSlot.slot(of: "foo") == 12182)
        #expect(RedisClusterSlot.slot(of: "bar") == 5061)
        #expect(RedisClusterSlot.slot(of: "") == 0)
    }

    @Test func hashTagsPickTheFirstNonEmptyBracedPart() {
        let user = RedisClusterSlot.slot(of: "user1000")
        #expect(RedisClusterSlot.slot(of: "{user1000}.following") == user)
        #expect(RedisClusterSlot.slot(of: "{user1000}.followers") == user)
        #expect(RedisClusterSlot.slot(of: "foo{}{bar}") == RedisClusterSlot.slot(of: "foo{}{bar}"))
        #expect(String(decoding: RedisClusterSlot.hashTag(of: Array("foo{}{bar}".utf8)), as: UTF8.self) == "foo{}{bar}")
        #expect(String(decoding: RedisClusterSlot.hashTag(of: Array("foo{{bar}}zap".utf8)), as: UTF8.self) == "{bar")
        #expect(String(decoding: RedisClusterSlot.hashTag(of: Array("foo{bar}{zap}".utf8)), as: UTF8.self) == "bar")
        #expect(
            String(decoding: RedisClusterSlot.hashTag(of: Array("push:{com.example.game#3}:token:ab".utf8)), as: UTF8.self) == "com.example.game#3")
        #expect(String(decoding: RedisClusterSlot.hashTag(of: Array("no{close".utf8)), as: UTF8.self) == "no{close")
    }

    @Test func commandsRouteByTheirKey() {
        func key(_ command: RedisCommand) -> String? { command.routingKey.map { String(decoding: $0, as: UTF8.self) } }
        #expect(key(["GET", "a"]) == "a")
        #expect(key(["HMGET", "push:{x}:token:1", "user"]) == "push:{x}:token:1")
        #expect(key(["EVALSHA", "abc", "2", "k1", "k2", "arg"]) == "k1")
        #expect(key(["evalsha", "abc", "0", "arg"]) == nil)
        #expect(key(["EVAL", "return 1", "x"]) == nil, "an unreadable key count")
        #expect(key(["PING"]) == nil)
        #expect(key(["INFO", "server"]) == nil)
        #expect(key(["CLUSTER", "SLOTS"]) == nil)
        #expect(key(RedisCommand(["INFO", "server"]).routed(byKey: "push:{x#2}:tokens")) == "push:{x#2}:tokens")
    }

    @Test func aClusterSlotsReplyBecomesTheMap() throws {
        func node(_ host: String, _ port: Int64, _ id: String) -> RedisReply {
            .array([.bulk(Array(host.utf8)), .integer(port), .bulk(Array(id.utf8))])
        }
        let reply = RedisReply.array([
            .array([.integer(0), .integer(5460), node("10.0.0.1", 7000, "a"), node("10.0.0.4", 7003, "d")]),
            .array([.integer(5461), .integer(10922), node("", 7001, "b")]),
            .array([.integer(10923), .integer(16383), node("10.0.0.3", 7002, "c")]),
        ])
        var map = try RedisSlotMap(clusterSlots: reply, askedHost: "seed.internal")
        #expect(map.servesEverySlot)
        #expect(map.master(forSlot: 0) == RedisEndpoint(host: "10.0.0.1", port: 7000))
        #expect(map.master(forSlot: 5461) == RedisEndpoint(host: "seed.internal", port: 7001), "an empty host is the asked node's")
        #expect(map.master(forSlot: 16383) == RedisEndpoint(host: "10.0.0.3", port: 7002))
        #expect(
            map.slotsPerMaster == [
                RedisEndpoint(host: "10.0.0.1", port: 7000): 5461, RedisEndpoint(host: "seed.internal", port: 7001): 5462,
                RedisEndpoint(host: "10.0.0.3", port: 7002): 5461,
            ])
        map.move(slot: 42, to: RedisEndpoint(host: "10.0.0.4", port: 7003))
        #expect(map.master(forSlot: 42) == RedisEndpoint(host: "10.0.0.4", port: 7003))
        #expect(map.masters.count == 4)

        let partial = try RedisSlotMap(clusterSlots: .array([.array([.integer(0), .integer(99), node("?", 7000, "a")])]), askedHost: "h")
        #expect(!partial.servesEverySlot)
        #expect(partial.master(forSlot: 0) == nil, "a master of unknown address serves nothing")
        #expect(throws: RedisError.self) { try RedisSlotMap(clusterSlots: .array([.array([.integer(0)])]), askedHost: "h") }
        #expect(throws: RedisError.self) {
            try RedisSlotMap(clusterSlots: .array([.array([.integer(5), .integer(16384), node("h", 1, "x")])]), askedHost: "h")
        }
    }

    @Test func redirectsNameTheSlotAndTheNode() {
        let node = RedisEndpoint(host: "10.0.0.9", port: 7009)
        #expect(
            RedisRedirect(errorMessage: "MOVED 3999 127.0.0.1:6381", answeredBy: node) == RedisRedirect(kindForTest: .moved, 3999, "127.0.0.1", 6381))
        #expect(RedisRedirect(errorMessage: "ASK 3999 127.0.0.1:6381", answeredBy: node) == RedisRedirect(kindForTest: .ask, 3999, "127.0.0.1", 6381))
        #expect(RedisRedirect(errorMessage: "MOVED 12 :7001", answeredBy: node) == RedisRedirect(kindForTest: .moved, 12, "10.0.0.9", 7001))
        #expect(RedisRedirect(errorMessage: "MOVED 12 [::1]:7001", answeredBy: node) == RedisRedirect(kindForTest: .moved, 12, "::1", 7001))
        #expect(RedisRedirect(errorMessage: "MOVED 16384 h:1", answeredBy: node) == nil)
        #expect(RedisRedirect(errorMessage: "ERR unknown command", answeredBy: node) == nil)
        #expect(RedisClusterRouter.isTransient("CLUSTERDOWN The cluster is down"))
        #expect(RedisClusterRouter.isTransient("TRYAGAIN Multiple keys request during rehashing of slot"))
        #expect(!RedisClusterRouter.isTransient("ERR wrong number of arguments"))
    }

    @Test func aClusterURLListsSeeds() throws {
        let configuration = try RedisConfiguration(url: "redis+cluster://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002?pool_size=3")
        #expect(configuration.isCluster)
        #expect(
            configuration.clusterSeeds == [
                RedisEndpoint(host: "10.0.0.1", port: 7000), RedisEndpoint(host: "10.0.0.2", port: 6379), RedisEndpoint(host: "::1", port: 7002),
            ])
        #expect(configuration.endpoint == RedisEndpoint(host: "10.0.0.1", port: 7000))
        #expect(configuration.password == "pw")
        #expect(configuration.poolSize == 3)
        #expect(configuration.description == "redis+cluster://:***@10.0.0.1:7000,10.0.0.2:6379,[::1]:7002/0")
        #expect(!(try RedisConfiguration(url: "redis://h:1/2")).isCluster)
    }

    @Test(arguments: [
        ("redis+cluster://a:1,,b:2", "an empty host"),
        ("redis+cluster://a:1,a:1", "a:1 is listed twice"),
        ("redis+cluster://a:1,b:2/3", "database 3 in a Redis Cluster URL"),
        ("redis://a:1,b:2", "several hosts in a redis:// URL"),
        ("redis+cluster://a:1,b:x", "invalid port 'x'"),
        ("rediss+cluster://a:1", "is not supported"),
    ])
    func badClusterURLsSayWhy(url: String, expected: String) {
        #expect {
            try RedisConfiguration(url: url)
        } throws: { error in
            (error as? RedisError)?.message.contains(expected) == true
        }
    }
}

extension RedisRedirect {
    init(kindForTest kind: Kind, _ slot: Int, _ host: String, _ port: Int) {
        self.init(
            errorMessage: "\(kind == .moved ? "MOVED" : "ASK") \(slot) \(host.contains(":") ? "[\(host)]" : host):\(port)",
            answeredBy: RedisEndpoint(host: "x", port: 1))!
    }
}
