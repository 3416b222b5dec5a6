public import PushCore
public import Redis
public import TokenRegistry

/// An app's registry keys in every shard, for tests that check set memberships and records
/// without caring which shard a device lives in (``TokenRegistry/RegistryLayout``).
public struct RegistrySets: Sendable {
    /// Every shard's keys, in scan order.
    public let shards: [RegistryKeys]

    public init(shards: [RegistryKeys]) {
        self.shards = shards
    }

    /// `app`'s shards as `registry` sees them now (creating the app's layout if it has none).
    public init(registry: TokenRegistry, app: String) async throws {
        self.init(shards: try await registry.allKeys(app: app))
    }

    private var layout: RegistryLayout { RegistryLayout(shards: shards.count) }

    /// The keys of the shard holding `device`'s data.
    public func shard(of device: DeviceToken) -> RegistryKeys { shards[layout.shard(of: device)] }

    public func user(_ user: String) -> RegistrySet { RegistrySet(keys: shards.map { $0.user(user) }) }
    public func topic(_ topic: String) -> RegistrySet { RegistrySet(keys: shards.map { $0.topic(topic) }) }
    public var tokens: RegistrySet { RegistrySet(keys: shards.map(\.tokens)) }
    public func activityTokens(activityID: String) -> RegistrySet { RegistrySet(keys: shards.map { $0.activityTokens(activityID: activityID) }) }
    public func activityTokens(user: String) -> RegistrySet { RegistrySet(keys: shards.map { $0.activityTokens(user: user) }) }
    public func pushToStartTokens(attributesType: String) -> RegistrySet {
        RegistrySet(keys: shards.map { $0.pushToStartTokens(attributesType: attributesType) })
    }
    public func pushToStartTokens(user: String) -> RegistrySet { RegistrySet(keys: shards.map { $0.pushToStartTokens(user: user) }) }

    /// `device`'s record.
    public func record(_ device: DeviceToken) -> String { shard(of: device).record(device) }
    /// `device`'s removal note.
    public func removalNote(_ device: DeviceToken) -> String { shard(of: device).removalNote(device) }
    /// A Live Activity token's record: in its *device's* shard.
    public func activityRecord(_ token: DeviceToken, device: DeviceToken) -> String { shard(of: device).activityRecord(token) }
}

/// One registry set, kept per shard.
public struct RegistrySet: Sendable {
    public let keys: [String]
}

extension RedisCommandExecutor {
    /// The members of `set` in every shard, sorted.
    public func members(_ set: RegistrySet) async throws -> [String] {
        var members: [String] = []
        for reply in try await pipeline(set.keys.map { RedisCommand(["SMEMBERS", $0]) }) {
            members += try reply.throwingServerError().array?.compactMap(\.string) ?? []
        }
        return members.sorted()
    }

    /// Whether any shard holds `set`.
    public func exists(_ set: RegistrySet) async throws -> Bool {
        try await pipeline(set.keys.map { RedisCommand(["EXISTS", $0]) }).contains { $0.integer == 1 }
    }
}
