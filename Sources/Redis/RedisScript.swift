/// A Lua script run with `EVALSHA`, named by the SHA-1 of its source as Redis names it.
///
/// Keep scripts as `static let`s: the digest is computed once. Redis forgets scripts on restart and on
/// `SCRIPT FLUSH`; ``RedisCommandExecutor/evalScript(_:keys:args:)`` then sends the source once with
/// `EVAL` (which also caches it) and carries on, so callers never load scripts by hand.
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// 40 lowercase hex digits, equal to what `SCRIPT LOAD` returns for ``source``.
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        self.sha1 = SHA1.hexDigest(source.utf8)
    }
}
