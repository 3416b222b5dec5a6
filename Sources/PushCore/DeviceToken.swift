/// An APNs device token, normalised: lowercase hex, even length, 64–200 characters.
///
/// Apps send tokens in several shapes; `init(normalizing:)` accepts the `NSData` description old
/// apps send (`<740f4707 bebcf74f …>`: angle brackets and spaces are stripped) and any case.
public struct DeviceToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The normalised token: lowercase hex.
    public let hex: String

    /// Normalises and validates `text`; throws a ``RegistrationError`` naming `field`.
    public init(normalizing text: String, field: String = "token") throws(RegistrationError) {
        // Fast path: already normalised (every token read back from the registry), kept as is.
        let utf8 = text.utf8
        if (64...200).contains(utf8.count), utf8.count % 2 == 0,
            utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        {
            self.hex = text
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
        guard (64...200).contains(hex.count) else {
            throw RegistrationError(.invalidToken, field: field, "must be 64–200 hex characters (got \(hex.count))")
        }
        guard hex.count % 2 == 0 else {
            throw RegistrationError(.invalidToken, field: field, "must have an even number of hex characters (got \(hex.count))")
        }
        self.hex = hex
    }

    /// A prefix for log lines: whole tokens are never logged.
    public var redacted: String { String(hex.prefix(8)) + "…" }

    public var description: String { redacted }

    public static func < (lhs: DeviceToken, rhs: DeviceToken) -> Bool { lhs.hex < rhs.hex }
}
