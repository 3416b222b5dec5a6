public import PushCore

/// The Redis keys of one shard of an app's registry (DESIGN.md, "Data in Redis"; the shards are
/// ``RegistryLayout``'s).
///
/// | key | type | holds |
/// |---|---|---|
/// | `{prefix}:{<tag>}:token:<hex>` | hash | the token record (see ``DeviceRecord`` and the fields below) |
/// | `{prefix}:{<tag>}:user:<user>` | set | the user's tokens in this shard |
/// | `{prefix}:{<tag>}:topic:<topic>` | set | tokens of this shard subscribed to that topic |
/// | `{prefix}:{<tag>}:tokens` | set | every token of this shard |
/// | `{prefix}:{<tag>}:gone:<hex>` | string | a deletion's time (ms): a tombstone, so an older registration arriving late cannot revive the device |
/// | `{prefix}:{<tag>}:removed:<hex>` | string | a removal note: `<ms> <reason>` of a recent invalid-token removal, expiring on its own (``TokenRegistry/removeIfNotRegistered(_:now:noteLifetime:)``) |
///
/// `<tag>` is the app's bundle id in the single-tag layout (`push:{com.example.game}:token:ab12…`),
/// or the shard's tag (`push:{com.example.game#3}:token:ab12…`): a Redis Cluster hash tag, so one
/// Lua script may touch a record and every set it belongs to atomically. User ids and topics are
/// used verbatim (binary-safe keys).
///
/// Beside the shards, under `{prefix}:{<app>}:`, are the app's ``layoutKey`` (see
/// ``RegistryLayouts``) and push-feedback's stale-token sweep (`sweep`, `sweep:lease`, see
/// `StaleTokenSweeper`).
///
/// Record hash fields (all values text):
///
/// | field | value |
/// |---|---|
/// | `user`, `locale` | as registered; absent when not given |
/// | `environment` | `production` or `sandbox` (the app's default when the device gave none) |
/// | `topics` | a JSON array of strings (`[]` for none) |
/// | `uuid`, `name`, `model`, `os_version`, `app_version` | device facts; absent when not given |
/// | `alert`, `badge`, `sound` | `1` or `0` |
/// | `registered_at`, `updated_at` | ms since 1970, decimal |
///
/// Only the scripts of ``TokenRegistry`` write these keys; anything else found there is reported as
/// ``RegistryError/Code/corruptRecord``.
public struct RegistryKeys: Sendable, Hashable {
    public let prefix: String
    public let app: String
    /// The hash tag of this shard: the app itself in the single-tag layout.
    public let tag: String

    public init(prefix: String = "push", app: String, tag: String? = nil) {
        self.prefix = prefix
        self.app = app
        self.tag = tag ?? app
    }

    /// `{prefix}:{<tag>}:`: the start of every key of this shard; the scripts build user and topic
    /// keys from it.
    public var base: String { "\(prefix):{\(tag)}:" }

    /// The hash holding `token`'s record.
    public func record(_ token: DeviceToken) -> String { base + "token:" + token.hex }
    /// The set of `user`'s tokens (in this shard).
    public func user(_ user: String) -> String { base + "user:" + user }
    /// The set of tokens subscribed to `topic` (in this shard).
    public func topic(_ topic: String) -> String { base + "topic:" + topic }
    /// The set of every token of this shard.
    public var tokens: String { base + "tokens" }

    /// The app's layout (``RegistryLayouts``), under the app's own tag whatever its layout.
    public static func layoutKey(prefix: String, app: String) -> String { "\(prefix):{\(app)}:layout" }
}
