#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The operator's proxies (addresses and CIDR ranges, IPv4 and IPv6), and which address a request
/// is from given them: the TCP peer, unless the peer is a trusted proxy; then the rightmost
/// `X-Forwarded-For` entry that is not itself a trusted proxy, i.e. the first address a proxy of
/// ours saw. Entries to its left were written by the client and prove nothing. An untrusted peer's
/// header is ignored, so nobody can choose the address they are counted under.
public struct TrustedProxies: Sendable, Hashable, CustomStringConvertible {
    /// One address or range: the first `prefixLength` bits of `address` (4 bytes for IPv4, 16 for IPv6).
    struct Network: Sendable, Hashable {
        let address: [UInt8]
        let prefixLength: Int

        func contains(_ candidate: [UInt8]) -> Bool {
            guard candidate.count == address.count else { return false }
            var bits = prefixLength
            for (a, b) in zip(address, candidate) where bits > 0 {
                let mask: UInt8 = bits >= 8 ? 0xff : ~(0xff >> UInt8(bits))
                guard a & mask == b & mask else { return false }
                bits -= 8
            }
            return true
        }
    }

    private let networks: [Network]
    /// The ranges as given, for `--help` and logs.
    public let entries: [String]

    public static let none = TrustedProxies(networks: [], entries: [])

    private init(networks: [Network], entries: [String]) {
        self.networks = networks
        self.entries = entries
    }

    /// Comma-separated addresses and ranges (`10.0.0.5, 10.0.0.0/8, fd00::/8`); nil when one is
    /// neither (the caller's error names the key).
    public init?(parsing text: String) {
        var networks: [Network] = []
        var entries: [String] = []
        for part in text.split(separator: ",") {
            let entry = String(part.filter { $0 != " " && $0 != "\t" })
            guard !entry.isEmpty else { continue }
            let pieces = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = Self.bytes(of: String(pieces[0])) else { return nil }
            var length = address.count * 8
            if pieces.count == 2 {
                guard let given = Int(pieces[1]), (0...length).contains(given), pieces[1].allSatisfy(\.isNumber) else { return nil }
                length = given
            }
            networks.append(Network(address: address, prefixLength: length))
            entries.append(entry)
        }
        self.init(networks: networks, entries: entries)
    }

    public var isEmpty: Bool { networks.isEmpty }

    public var description: String { entries.isEmpty ? "none" : entries.joined(separator: ",") }

    /// Whether `address` (text, as a socket reports it) is one of the proxies.
    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.bytes(of: address) else { return false }
        return networks.contains { $0.contains(bytes) }
    }

    /// The client address of a request from `peer` carrying `forwardedFor` (each `X-Forwarded-For`
    /// header value, in order). What is returned is at most 64 characters.
    public func clientAddress(peer: String, forwardedFor: [String]) -> String {
        guard contains(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { Self.trimmingSpaces($0) }.filter { !$0.isEmpty }
        for hop in hops.reversed() where !contains(hop) {
            return String(hop.prefix(64))
        }
        return String((hops.first ?? peer).prefix(64))
    }

    /// The bytes of an IPv4 or IPv6 address in text; an IPv4-mapped IPv6 address (`::ffff:10.0.0.5`)
    /// as its IPv4 bytes, so a range in either form matches.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff { return Array(bytes[12...]) }
        return bytes
    }

    private static func trimmingSpaces(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
