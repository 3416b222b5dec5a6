import Foundation

/// Fills a catalog's format string with a notification's `loc-args`, as the device would:
/// `"%@ and %@ have invited you to play Monopoly"` with `["Jenna", "Frank"]` gives
/// `"Jenna and Frank have invited you to play Monopoly"`.
///
/// Supported: `%@` and `%s` (the argument as given), positional `%1$@`, integers `%d` `%i` `%u`
/// (with length modifiers `h`, `hh`, `l`, `ll`, `q`, `z`, `t`, `j`; the argument must be a whole
/// number), `%x` `%X` `%o`, `%f` `%e` `%g` with a precision, `%c`, width and the `-`/`0` flags, and
/// `%%`. Plain and positional conversions may be mixed; plain ones take the arguments in order.
/// Anything else — too few arguments, an unknown conversion, a non-number for `%d` — is a
/// ``LocalizedFormatError``, and the caller leaves the key for the device to resolve.
public enum LocalizedFormat {
    public static func format(_ format: String, arguments: [String]) throws(LocalizedFormatError) -> String {
        let scalars = Array(format.unicodeScalars)
        var output = String.UnicodeScalarView()
        var index = 0
        var nextArgument = 0
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            guard scalar == "%" else {
                output.append(scalar)
                continue
            }
            guard index < scalars.count else { throw LocalizedFormatError("the format ends with a lone %") }
            if scalars[index] == "%" {
                output.append("%")
                index += 1
                continue
            }
            // %[n$][flags][width][.precision][length]conversion
            var position: Int?
            var lookahead = index
            var digits = 0
            while lookahead < scalars.count, let digit = Self.digit(scalars[lookahead]) {
                digits = min(digits * 10 + digit, Self.maximumNumber + 1)
                lookahead += 1
            }
            if lookahead > index, lookahead < scalars.count, scalars[lookahead] == "$" {
                guard digits >= 1 else { throw LocalizedFormatError("argument positions start at 1") }
                position = digits
                index = lookahead + 1
            }
            var leftAlign = false
            var zeroPad = false
            while index < scalars.count, "-+ #0'".unicodeScalars.contains(scalars[index]) {
                if scalars[index] == "-" { leftAlign = true }
                if scalars[index] == "0" { zeroPad = true }
                index += 1
            }
            var width = 0
            while index < scalars.count, let digit = Self.digit(scalars[index]) {
                width = min(width * 10 + digit, Self.maximumNumber + 1)
                index += 1
            }
            guard width <= Self.maximumNumber else { throw LocalizedFormatError("a width over \(Self.maximumNumber)") }
            var precision: Int?
            if index < scalars.count, scalars[index] == "." {
                index += 1
                var value = 0
                while index < scalars.count, let digit = Self.digit(scalars[index]) {
                    value = min(value * 10 + digit, Self.maximumNumber + 1)
                    index += 1
                }
                guard value <= Self.maximumNumber else { throw LocalizedFormatError("a precision over \(Self.maximumNumber)") }
                precision = value
            }
            while index < scalars.count, "hlqztjL".unicodeScalars.contains(scalars[index]) { index += 1 }
            guard index < scalars.count else { throw LocalizedFormatError("the format ends inside a conversion") }
            let conversion = scalars[index]
            index += 1
            let argumentIndex: Int
            if let position {
                argumentIndex = position - 1
            } else {
                argumentIndex = nextArgument
                nextArgument += 1
            }
            guard argumentIndex < arguments.count else {
                throw LocalizedFormatError("the format needs argument \(argumentIndex + 1) but loc-args has \(arguments.count)")
            }
            let argument = arguments[argumentIndex]
            var text: String
            var numeric = false
            switch conversion {
            case "@", "s", "S", "c", "C":
                text = argument
                if let precision, conversion == "s" || conversion == "@" { text = String(text.prefix(precision)) }
            case "d", "i", "D":
                guard let value = Int64(argument.trimmingCharacters(in: .whitespaces)) else {
                    throw LocalizedFormatError("%\(conversion) needs a whole number, got \"\(argument)\"")
                }
                text = String(value)
                numeric = true
            case "u", "U", "x", "X", "o", "O":
                guard let value = UInt64(argument.trimmingCharacters(in: .whitespaces)) else {
                    throw LocalizedFormatError("%\(conversion) needs a whole number ≥ 0, got \"\(argument)\"")
                }
                switch conversion {
                case "x": text = String(value, radix: 16)
                case "X": text = String(value, radix: 16, uppercase: true)
                case "o", "O": text = String(value, radix: 8)
                default: text = String(value)
                }
                numeric = true
            case "f", "F", "e", "E", "g", "G":
                guard let value = Double(argument.trimmingCharacters(in: .whitespaces)) else {
                    throw LocalizedFormatError("%\(conversion) needs a number, got \"\(argument)\"")
                }
                text = String(format: "%.\(precision ?? 6)\(Character(conversion))", value)
                numeric = true
            default:
                throw LocalizedFormatError("unsupported conversion %\(conversion)")
            }
            let length = text.count
            if width > length {
                let padding = width - length
                if leftAlign {
                    text += String(repeating: " ", count: padding)
                } else if zeroPad, numeric {
                    let negative = text.hasPrefix("-")
                    let digitsPart = negative ? String(text.dropFirst()) : text
                    text = (negative ? "-" : "") + String(repeating: "0", count: padding) + digitsPart
                } else {
                    text = String(repeating: " ", count: padding) + text
                }
            }
            output.append(contentsOf: text.unicodeScalars)
        }
        return String(output)
    }

    /// The largest width, precision or argument position accepted: notification texts are short.
    static let maximumNumber = 1000

    private static func digit(_ scalar: Unicode.Scalar) -> Int? {
        ("0"..."9").contains(scalar) ? Int(scalar.value - 0x30) : nil
    }
}

/// A format string that cannot be filled with the given arguments.
public struct LocalizedFormatError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
