/// Which (topic, token) pairs were accepted at least once, to count duplicates exactly over runs
/// far larger than the delivery record (`--track-duplicates`; benchmarks and the chaos suite ask it
/// whether every token arrived exactly once).
///
/// Keeps one 64-bit FNV-1a hash per pair (about 16 bytes each in the set: 16 MB for a million
/// tokens). Two pairs share a hash with probability about n²/2⁶⁵, below 10⁻⁷ for ten million.
struct DistinctDeliveries: Sendable {
    private var seen: Set<UInt64> = []
    /// Accepted deliveries of a pair accepted before.
    private(set) var duplicates = 0

    var distinct: Int { seen.count }

    mutating func record(_ delivery: RecordedDelivery) {
        if !seen.insert(delivery.identityHash).inserted { duplicates += 1 }
    }
}
