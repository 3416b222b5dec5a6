import PushCore

/// Where each token of one fan-out round has its delivery mark: the mark set (``SendBatch/markSet``)
/// and slot push-send will mark when APNs accepts it. Written to Redis before the round's batches are
/// published, so a push-render that dies before the round is saved can be resumed without sending
/// the round twice.
///
/// Why: a resumed round is scanned again, and when the registry changed in between (push-feedback
/// removed dead tokens, devices registered) its tokens fall into other batches, whose fingerprints
/// (``SendBatch/effectiveMarkSet``) push-send has never marked — the whole round went out again. With
/// the plan, every token the first try batched goes into a batch that names that try's mark set and
/// slot, so push-send skips what APNs already accepted, whatever else changed.
struct RoundPlan: Sendable, Equatable {
    /// The request's batch sequence before the round (``RenderProgress/sequence``).
    var startSequence: Int
    /// The mark sets the round's tokens use, in first-use order.
    private(set) var markSets: [String] = []
    /// Per token fingerprint (``TokenDeduplicator/fingerprint(_:)``): its mark set (index into
    /// ``markSets``) and slot.
    private(set) var places: [UInt64: Place] = [:]

    struct Place: Sendable, Equatable {
        var markSet: Int
        var slot: Int
    }

    init(startSequence: Int) {
        self.startSequence = startSequence
    }

    var isEmpty: Bool { places.isEmpty }
    var count: Int { places.count }

    /// Where the token with `fingerprint` was placed, as (mark set, slot).
    func place(of fingerprint: UInt64) -> (markSet: String, slot: Int)? {
        guard let place = places[fingerprint] else { return nil }
        return (markSets[place.markSet], place.slot)
    }

    /// Records that the tokens with `fingerprints` have slots `slots` of `markSet`.
    mutating func add(markSet: String, fingerprints: [UInt64], slots: [Int]) {
        precondition(fingerprints.count == slots.count, "one slot per token")
        let index: Int
        if let last = markSets.last, last == markSet {
            index = markSets.count - 1
        } else if let found = markSets.firstIndex(of: markSet) {
            index = found
        } else {
            markSets.append(markSet)
            index = markSets.count - 1
        }
        for (fingerprint, slot) in zip(fingerprints, slots) { places[fingerprint] = Place(markSet: index, slot: slot) }
    }

    /// Fingerprints of every token the plan places.
    var fingerprints: Dictionary<UInt64, Place>.Keys { places.keys }

    /// Adds `other`'s places of `fingerprints` (tokens a resumed fan-out has not reached yet), so a
    /// second interruption still finds where the first try put them.
    mutating func carryOver(_ fingerprints: some Sequence<UInt64>, from other: RoundPlan) {
        for fingerprint in fingerprints {
            guard let place = other.place(of: fingerprint) else { continue }
            add(markSet: place.markSet, fingerprints: [fingerprint], slots: [place.slot])
        }
    }

    // MARK: Redis form

    /// Format version, the first byte.
    static let version: UInt8 = 1

    /// Little-endian: version (1 byte), start sequence (8), mark set count (4); per mark set its
    /// UTF-8 length (2) and bytes, its token count (4), and per token fingerprint (8) and slot (4).
    /// About 12 bytes a token; a 10,000-token round is about 120 KB.
    var encoded: [UInt8] {
        var grouped = [[(UInt64, Int)]](repeating: [], count: markSets.count)
        for (fingerprint, place) in places { grouped[place.markSet].append((fingerprint, place.slot)) }
        var bytes: [UInt8] = [Self.version]
        bytes.reserveCapacity(13 + markSets.count * 40 + places.count * 12)
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        append(UInt64(startSequence))
        append(UInt32(markSets.count))
        for (index, markSet) in markSets.enumerated() {
            append(UInt16(markSet.utf8.count))
            bytes.append(contentsOf: markSet.utf8)
            append(UInt32(grouped[index].count))
            for (fingerprint, slot) in grouped[index] {
                append(fingerprint)
                append(UInt32(slot))
            }
        }
        return bytes
    }

    /// Reads ``encoded``; nil when the bytes are not a plan this version wrote.
    init?(encoded bytes: [UInt8]) {
        var offset = 0
        func read<T: FixedWidthInteger>(_: T.Type) -> T? {
            let size = MemoryLayout<T>.size
            guard offset + size <= bytes.count else { return nil }
            var value: T = 0
            for byte in 0..<size { value |= T(bytes[offset + byte]) << (8 * byte) }
            offset += size
            return value
        }
        guard read(UInt8.self) == Self.version, let start = read(UInt64.self), start <= UInt64(Int.max),
            let markSetCount = read(UInt32.self)
        else { return nil }
        self.init(startSequence: Int(start))
        for _ in 0..<markSetCount {
            guard let length = read(UInt16.self), offset + Int(length) <= bytes.count else { return nil }
            let name = String(decoding: bytes[offset..<offset + Int(length)], as: UTF8.self)
            offset += Int(length)
            guard let tokenCount = read(UInt32.self), Int(tokenCount) <= (bytes.count - offset) / 12 else { return nil }
            var fingerprints: [UInt64] = []
            var slots: [Int] = []
            fingerprints.reserveCapacity(Int(tokenCount))
            slots.reserveCapacity(Int(tokenCount))
            for _ in 0..<tokenCount {
                guard let fingerprint = read(UInt64.self), let slot = read(UInt32.self) else { return nil }
                fingerprints.append(fingerprint)
                slots.append(Int(slot))
            }
            markSets.append(name)
            for (fingerprint, slot) in zip(fingerprints, slots) { places[fingerprint] = Place(markSet: markSets.count - 1, slot: slot) }
        }
        guard offset == bytes.count else { return nil }
    }
}
