/// An APNs device token, normalised: lowercase hex, even length, 64–200 characters.
///
/// Apps send tokens in several shapes; `init(normalizing:)` accepts the `NSData` description old
/// apps send (`<740f4707 bebcf74f …>`: angle brackets and spaces are stripped) and any case.
public struct DeviceToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The normalised token: lowercase hex.
    public let hex: String

    /// Normalises and validates `text`; throws a ``RegistrationError`` naming `field`.
    public init(normalizing text: String, field: String = "token") throws(RegistrationError) {
        // Already normalised (every token read back from the registry): kept as is, no copy.
        let utf8 = text.utf8
        if (64...200).contains(utf8.count), utf8.count % 2 == 0,
            utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        {
            try self.init(checkedDigits: text, field: field)
            return
        }
        // Byte by byte: every registration and every feedback event comes through here. Anything
        // other than hex digits, brackets and spaces is reported by the scalar loop below.
        var digits: [UInt8] = []
        digits.reserveCapacity(text.utf8.count)
        var plain = true
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: " "): continue
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): digits.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digits.append(byte + 32)
            default: plain = false
            }
            if !plain { break }
        }
        if plain {
            try self.init(checkedDigits: String(decoding: digits, as: UTF8.self), field: field)
            return
        }
        var hex = ""
        hex.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "<", ">", " ": continue
            case "0"..."9", "a"..."f": hex.unicodeScalars.append(scalar)
            case "A"..."F": hex.unicodeScalars.append(Unicode.Scalar(scalar.value + 32)!)
            default:
                throw RegistrationError(.invalidToken, field: field, "must be hexadecimal (found '\(scalar.escaped(asASCII: true))')")
            }
        }
        try self.init(checkedDigits: hex, field: field)
    }

    /// `hex` (lowercase hex digits only) once its length is checked.
    private init(checkedDigits hex: String, field: String) throws(RegistrationError) {
        let count = hex.utf8.count
        guard (64...200).contains(count) else {
            throw RegistrationError(.invalidToken, field: field, "must be 64–200 hex characters (got \(count))")
        }
        guard count % 2 == 0 else {
            throw RegistrationError(.invalidToken, field: field, "must have an even number of hex characters (got \(count))")
        }
        self.hex = hex
    }

    /// A prefix for log lines: whole tokens are never logged.
    public var redacted: String { Self.redacted(hex: hex) }

    /// A token's hex as logs show it: its first 8 digits (for tokens kept as text).
    public static func redacted(hex: String) -> String { String(hex.prefix(8)) + "…" }

    public var description: String { redacted }

    public static func < (lhs: DeviceToken, rhs: DeviceToken) -> Bool { lhs.hex < rhs.hex }
}
