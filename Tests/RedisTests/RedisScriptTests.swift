import Testing

@testable import Redis

@Suite("SHA-1 and RedisScript")
struct RedisScriptTests {
    @Test(arguments: [
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        ("The quick brown fox jumps over the lazy dog", "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    ])
    func knownVectors(message: String, digest: String) {
        #expect(SHA1.hexDigest(message.utf8) == digest)
    }

    @Test func oneMillionAs() {
        #expect(SHA1.hexDigest([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
    }

    @Test func paddingBoundaries() {
        // 55, 56 and 64 bytes straddle the one-block/two-block padding boundary.
        #expect(SHA1.hexDigest([UInt8](repeating: 0x61, count: 55)) == "c1c8bbdc22796e28c0e15163d20899b65621d65a")
        #expect(SHA1.hexDigest([UInt8](repeating: 0x61, count: 56)) == "c2db330f6083854c99d4b5bfb6e8f29f201be699")
        #expect(SHA1.hexDigest([UInt8](repeating: 0x61, count: 64)) == "0098ba824b5c16427bd7a1122a5a442a25ec644d")
    }

    @Test func scriptNameIsTheSHA1OfItsSource() {
        let script = RedisScript("return 1")
        #expect(script.sha1 == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
        #expect(script.source == "return 1")
    }
}
