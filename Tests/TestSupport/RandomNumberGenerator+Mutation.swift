extension RandomNumberGenerator {
    /// `bytes` with one to four random edits, each replacing, removing or inserting a byte (inserted
    /// and replacing bytes drawn from `alphabet`): the decoders' fuzz tests feed these to check that
    /// no input crashes them. With ``SplitMix64`` and a fixed seed, the same inputs every run.
    public mutating func mutated(_ bytes: [UInt8], alphabet: [UInt8]) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<(1 + Int(next() % 4)) {
            let position = Int(next() % UInt64(bytes.count))
            switch next() % 3 {
            case 0: bytes[position] = alphabet[Int(next() % UInt64(alphabet.count))]
            case 1: bytes.remove(at: position)
            default: bytes.insert(alphabet[Int(next() % UInt64(alphabet.count))], at: position)
            }
        }
        return bytes
    }
}
