public import PushCore

/// The Redis keys of one app's registry (DESIGN.md, "Data in Redis").
///
/// | key | type | holds |
/// |---|---|---|
/// | `{prefix}:{<app>}:token:<hex>` | hash | the token record (see ``DeviceRecord`` and the fields below) |
/// | `{prefix}:{<app>}:user:<user>` | set | tokens registered by that user |
/// | `{prefix}:{<app>}:topic:<topic>` | set | tokens subscribed to that topic |
/// | `{prefix}:{<app>}:tokens` | set | every token of the app |
/// | `{prefix}:{<app>}:removed:<hex>` | string | a removal note: `<ms> <reason>` of a recent invalid-token removal, expiring on its own (``TokenRegistry/removeIfNotRegistered(_:now:noteLifetime:)``) |
///
/// push-feedback's stale-token sweep keeps its position beside them, in `{prefix}:{<app>}:sweep` and
/// `{prefix}:{<app>}:sweep:lease` (see `StaleTokenSweeper`).
///
/// The app's bundle id sits in braces — a Redis Cluster hash tag — so all keys of one app share a
/// slot and one Lua script may touch the record and every set it belongs to atomically, e.g.
/// `push:{com.example.game}:token:ab12…`. User ids and topics are used verbatim (binary-safe keys).
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

    public init(prefix: String = "push", app: String) {
        self.prefix = prefix
        self.app = app
    }

    /// `{prefix}:{<app>}:`: the start of every key of this app; the scripts build user and topic keys
    /// from it.
    public var base: String { "\(prefix):{\(app)}:" }

    /// The hash holding `token`'s record.
    public func record(_ token: DeviceToken) -> String { base + "token:" + token.hex }
    /// The set of `user`'s tokens.
    public func user(_ user: String) -> String { base + "user:" + user }
    /// The set of tokens subscribed to `topic`.
    public func topic(_ topic: String) -> String { base + "topic:" + topic }
    /// The set of every token of the app.
    public var tokens: String { base + "tokens" }
}
