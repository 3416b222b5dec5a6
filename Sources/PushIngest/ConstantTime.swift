import Crypto

/// Comparisons of secrets (API keys, legacy credentials) whose duration does not depend on where the
/// inputs differ, so an attacker cannot find a key byte by byte from response times.
enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes, looking at every byte of both.
    ///
    /// The length is not secret here: callers compare digests (fixed length) or hex strings whose
    /// length is public (an MD5 is 32 hex digits). Unequal lengths still walk the longer input.
    static func equals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        var difference: UInt8 = a.count == b.count ? 0 : 1
        var left = a.makeIterator()
        var right = b.makeIterator()
        for _ in 0..<max(a.count, b.count) {
            difference |= (left.next() ?? 0) ^ (right.next() ?? 0)
        }
        return difference == 0
    }

    /// `equals` over the UTF-8 bytes of two strings.
    static func equals(_ a: String, _ b: String) -> Bool {
        equals(Array(a.utf8), Array(b.utf8))
    }
}

/// One app's ingest API keys, kept as SHA-256 digests so checking a presented key compares 32 bytes
/// with every configured key, never stopping early: neither the matching key nor a key's length shows
/// in the response time.
struct BearerKeys: Sendable {
    private let digests: [[UInt8]]

    init(_ keys: [String]) {
        digests = keys.map { Array(SHA256.hash(data: Array($0.utf8))) }
    }

    /// Whether the app has no keys (the HTTP API then refuses every request for it).
    var isEmpty: Bool { digests.isEmpty }

    /// Whether `presented` is one of the keys; always compares against all of them.
    func accepts(_ presented: some StringProtocol) -> Bool {
        let digest = Array(SHA256.hash(data: Array(presented.utf8)))
        var matched = false
        for key in digests {
            matched = ConstantTime.equals(key, digest) || matched
        }
        return matched
    }
}
