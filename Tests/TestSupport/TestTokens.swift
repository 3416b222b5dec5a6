import Foundation
import PushCore

/// Device tokens for tests. APNs tokens are 64 hex digits; the tests want either readable ones they
/// can number (and find again by number) or random ones no other test uses.
public enum TestTokens {
    /// `seed` in hex behind `prefix`, padded with zeros to 64 digits: distinct per seed, and distinct
    /// from other suites' tokens when the prefix is.
    public static func numbered(_ seed: Int, prefix: String) -> DeviceToken {
        try! DeviceToken(normalizing: numberedHex(seed, prefix: prefix))
    }

    /// ``numbered(_:prefix:)`` as text, padded with `padding` (for tests of the text form).
    public static func numberedHex(_ seed: Int, prefix: String, padding: Character = "0") -> String {
        let tail = String(seed, radix: 16)
        return prefix + String(repeating: padding, count: 64 - prefix.count - tail.count) + tail
    }

    /// 32 random bytes as 64 lowercase hex digits: a token no other test uses.
    public static func random() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// 16 random hex digits, to put in front of ``numbered(_:prefix:)`` so a test's numbered tokens
    /// are its own.
    public static func randomPrefix() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16).padding(toLength: 16, withPad: "0", startingAt: 0)
    }
}
