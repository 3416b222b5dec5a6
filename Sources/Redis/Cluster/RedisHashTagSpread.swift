/// `count` hash tags that spread one name's keys (an app's registry, its rate limits) evenly over a
/// Redis Cluster: tag `i` is `<name>#<i>`, or `<name>#<i>.<k>` for the smallest `k` that puts its
/// slot in the `i`-th of `count` equal ranges of the slot space. A cluster made by
/// `redis-cli --cluster create` gives each master an equal range, so each master holds the same
/// number of tags (±1 where `count` is not a multiple of the masters); `count = 24` splits evenly over
/// 1, 2, 3, 4, 6, 8, 12 or 24 masters. With one tag the spread is the name itself (`{<name>}`, the
/// layout before spreading).
///
/// Which tag an item goes to is a stable hash of the item (``index(of:)``), the same in every process
/// and version, so services agree without talking.
public struct RedisHashTagSpread: Sendable, Hashable {
    public let name: String
    public let count: Int
    /// The tags, by index.
    public let tags: [String]

    public init(name: String, count: Int) {
        precondition(count >= 1 && count <= RedisClusterSlot.count, "a spread has 1 to 16,384 tags")
        self.name = name
        self.count = count
        guard count > 1 else {
            self.tags = [name]
            return
        }
        self.tags = (0..<count).map { index in
            let low = index * RedisClusterSlot.count / count
            let high = (index + 1) * RedisClusterSlot.count / count
            let plain = "\(name)#\(index)"
            if (low..<high).contains(RedisClusterSlot.slot(of: plain)) { return plain }
            var attempt = 1
            while true {
                let candidate = "\(name)#\(index).\(attempt)"
                if (low..<high).contains(RedisClusterSlot.slot(of: candidate)) { return candidate }
                attempt += 1
            }
        }
    }

    /// The tag of `index`.
    public func tag(_ index: Int) -> String { tags[index] }

    /// The index an item belongs to: FNV-1a (32 bits) of its bytes, modulo ``count``.
    public func index(of item: some Sequence<UInt8>) -> Int { Self.index(of: item, count: count) }

    /// ``index(of:)`` of a string's UTF-8 bytes.
    public func index(of item: String) -> Int { Self.index(of: item.utf8, count: count) }

    /// The index `item` has in any spread of `count` tags.
    public static func index(of item: some Sequence<UInt8>, count: Int) -> Int {
        guard count > 1 else { return 0 }
        var hash: UInt32 = 0x811C_9DC5
        for byte in item {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return Int(hash % UInt32(count))
    }
}
