/// A small, fast pseudo-random generator (SplitMix64) for fault rolls and ids: one per worker
/// thread, seedable so fault injection is reproducible in tests. Not for secrets.
struct FastRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    /// Seeded from the system's generator.
    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in 0..<1, with 53 bits of precision.
    mutating func nextUnitInterval() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A random (version 4) UUID in lowercase text form, as APNs writes `apns-id` and `apns-unique-id`.
    mutating func uuidString() -> String {
        let high = (next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var index = 0
            for position in 0..<32 {
                if position == 8 || position == 12 || position == 16 || position == 20 {
                    buffer[index] = UInt8(ascii: "-")
                    index += 1
                }
                let word = position < 16 ? high : low
                let shift = UInt64(60 - (position % 16) * 4)
                buffer[index] = hex[Int((word >> shift) & 0xF)]
                index += 1
            }
            return index
        }
    }
}
