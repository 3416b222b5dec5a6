/// One `<locale>.strings` file: Apple's strings-file syntax, as Xcode writes and translators edit it.
///
/// ```
/// /* A comment */
/// "GAME_PLAY_REQUEST_FORMAT" = "%@ and %@ have invited you to play Monopoly";
/// // Another comment
/// SHIPPED_TITLE = "Your order has shipped";
/// ```
///
/// - Encoding: UTF-16 with a byte-order mark (either endianness; Xcode's traditional output), UTF-8
///   with or without one, and BOM-less UTF-16 recognised by its zero bytes.
/// - Comments: `/* … */` and `// …` to the end of the line, anywhere whitespace may be.
/// - Keys and values: quoted strings, or unquoted words of letters, digits and `_ . - : / $`;
///   `"KEY";` alone means the value is the key.
/// - Escapes in quoted strings: `\"`, `\\`, `\n`, `\t`, `\r`, `\a`, `\b`, `\f`, `\v`, `\0`,
///   octal `\ooo`, `\Uxxxx` and `\uxxxx` (UTF-16 units; surrogate pairs are joined); any other
///   escaped character stands for itself.
/// - A key given twice keeps the last value (as Foundation does).
public struct StringsCatalog: Sendable, Equatable {
    public let strings: [String: String]

    public init(strings: [String: String]) {
        self.strings = strings
    }

    public subscript(key: String) -> String? { strings[key] }

    /// Parses a strings file's bytes; `name` (e.g. `de.strings`) prefixes error messages.
    public init(data: [UInt8], name: String = "strings file") throws(StringsCatalogError) {
        let text = try Self.decodeText(data, name: name)
        var parser = StringsParser(scalars: Array(text.unicodeScalars), name: name)
        self.strings = try parser.parse()
    }

    static func decodeText(_ data: [UInt8], name: String) throws(StringsCatalogError) -> String {
        func utf16(_ bytes: ArraySlice<UInt8>, bigEndian: Bool) throws(StringsCatalogError) -> String {
            guard bytes.count % 2 == 0 else { throw StringsCatalogError(name: name, line: 0, "is UTF-16 with an odd number of bytes") }
            var units: [UInt16] = []
            units.reserveCapacity(bytes.count / 2)
            var index = bytes.startIndex
            while index < bytes.endIndex {
                let first = UInt16(bytes[index])
                let second = UInt16(bytes[index + 1])
                units.append(bigEndian ? first << 8 | second : second << 8 | first)
                index += 2
            }
            guard let text = String(validating: units, as: UTF16.self) else {
                throw StringsCatalogError(name: name, line: 0, "is not valid UTF-16")
            }
            return text
        }
        if data.starts(with: [0xFF, 0xFE]) { return try utf16(data.dropFirst(2), bigEndian: false) }
        if data.starts(with: [0xFE, 0xFF]) { return try utf16(data.dropFirst(2), bigEndian: true) }
        if data.starts(with: [0xEF, 0xBB, 0xBF]) {
            guard let text = String(validating: data.dropFirst(3), as: UTF8.self) else {
                throw StringsCatalogError(name: name, line: 0, "is not valid UTF-8")
            }
            return text
        }
        // BOM-less UTF-16: text files start with ASCII, so one of the first two bytes is zero.
        if data.count >= 2, data.count % 2 == 0 {
            if data[0] == 0, data[1] != 0 { return try utf16(data[...], bigEndian: true) }
            if data[0] != 0, data[1] == 0 { return try utf16(data[...], bigEndian: false) }
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw StringsCatalogError(name: name, line: 0, "is neither valid UTF-8 nor UTF-16 with a byte-order mark")
        }
        return text
    }
}

/// A strings file that cannot be read, naming the file and line.
public struct StringsCatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    public let name: String
    /// 1-based; 0 when the problem is the whole file (its encoding).
    public let line: Int
    public let reason: String

    public init(name: String, line: Int, _ reason: String) {
        self.name = name
        self.line = line
        self.reason = reason
    }

    public var description: String { line > 0 ? "\(name):\(line): \(reason)" : "\(name): \(reason)" }
}

private struct StringsParser {
    let scalars: [Unicode.Scalar]
    let name: String
    var index = 0
    var line = 1

    init(scalars: [Unicode.Scalar], name: String) {
        self.scalars = scalars
        self.name = name
    }

    func error(_ reason: String) -> StringsCatalogError { StringsCatalogError(name: name, line: line, reason) }

    mutating func parse() throws(StringsCatalogError) -> [String: String] {
        var strings: [String: String] = [:]
        while true {
            try skipTrivia()
            guard index < scalars.count else { return strings }
            let key = try token(what: "a key")
            try skipTrivia()
            guard index < scalars.count else { throw error("expected '=' or ';' after the key \"\(key)\"") }
            if scalars[index] == ";" {
                index += 1
                strings[key] = key
                continue
            }
            guard scalars[index] == "=" else { throw error("expected '=' after the key \"\(key)\", found '\(scalars[index])'") }
            index += 1
            try skipTrivia()
            let value = try token(what: "a value")
            try skipTrivia()
            guard index < scalars.count, scalars[index] == ";" else { throw error("expected ';' after the value of \"\(key)\"") }
            index += 1
            strings[key] = value
        }
    }

    mutating func skipTrivia() throws(StringsCatalogError) {
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\n" {
                line += 1
                index += 1
            } else if scalar.properties.isWhitespace || scalar == "\u{FEFF}" {
                index += 1
            } else if scalar == "/", index + 1 < scalars.count, scalars[index + 1] == "*" {
                let startLine = line
                index += 2
                while true {
                    guard index + 1 < scalars.count else {
                        throw StringsCatalogError(name: name, line: startLine, "unterminated /* comment")
                    }
                    if scalars[index] == "*", scalars[index + 1] == "/" {
                        index += 2
                        break
                    }
                    if scalars[index] == "\n" { line += 1 }
                    index += 1
                }
            } else if scalar == "/", index + 1 < scalars.count, scalars[index + 1] == "/" {
                while index < scalars.count, scalars[index] != "\n" { index += 1 }
            } else {
                return
            }
        }
    }

    mutating func token(what: String) throws(StringsCatalogError) -> String {
        guard index < scalars.count else { throw error("expected \(what), found the end of the file") }
        if scalars[index] == "\"" { return try quoted() }
        var text = String.UnicodeScalarView()
        while index < scalars.count, Self.isUnquotedScalar(scalars[index]) {
            text.append(scalars[index])
            index += 1
        }
        guard !text.isEmpty else { throw error("expected \(what), found '\(scalars[index])'") }
        return String(text)
    }

    static func isUnquotedScalar(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar))) || "_.-:/$".unicodeScalars.contains(scalar)
    }

    mutating func quoted() throws(StringsCatalogError) -> String {
        let startLine = line
        index += 1
        var text = String.UnicodeScalarView()
        var pendingHighSurrogate: UInt32?
        func append(_ scalar: Unicode.Scalar) {
            if pendingHighSurrogate != nil {
                text.append("\u{FFFD}")
                pendingHighSurrogate = nil
            }
            text.append(scalar)
        }
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            switch scalar {
            case "\"":
                if pendingHighSurrogate != nil { text.append("\u{FFFD}") }
                return String(text)
            case "\\":
                guard index < scalars.count else { break }
                let escaped = scalars[index]
                index += 1
                switch escaped {
                case "n": append("\n")
                case "t": append("\t")
                case "r": append("\r")
                case "a": append("\u{07}")
                case "b": append("\u{08}")
                case "f": append("\u{0C}")
                case "v": append("\u{0B}")
                case "U", "u":
                    var value: UInt32 = 0
                    var digits = 0
                    while digits < 4, index < scalars.count, let digit = Self.hexValue(scalars[index]) {
                        value = value << 4 | digit
                        digits += 1
                        index += 1
                    }
                    guard digits > 0 else { throw error("\\\(escaped) needs hex digits") }
                    if (0xD800...0xDBFF).contains(value) {
                        if pendingHighSurrogate != nil { text.append("\u{FFFD}") }
                        pendingHighSurrogate = value
                    } else if (0xDC00...0xDFFF).contains(value), let high = pendingHighSurrogate {
                        pendingHighSurrogate = nil
                        text.append(Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (value - 0xDC00))!)
                    } else {
                        append(Unicode.Scalar(value) ?? "\u{FFFD}")
                    }
                case "0"..."7":
                    var value = escaped.value - 0x30
                    var digits = 1
                    while digits < 3, index < scalars.count, ("0"..."7").contains(scalars[index]) {
                        value = value * 8 + (scalars[index].value - 0x30)
                        digits += 1
                        index += 1
                    }
                    append(Unicode.Scalar(value)!)
                case "\n":
                    line += 1
                    append("\n")
                default:
                    append(escaped)
                }
            case "\n":
                line += 1
                append(scalar)
            default:
                append(scalar)
            }
        }
        throw StringsCatalogError(name: name, line: startLine, "unterminated string")
    }

    static func hexValue(_ scalar: Unicode.Scalar) -> UInt32? {
        switch scalar {
        case "0"..."9": scalar.value - 0x30
        case "a"..."f": scalar.value - 0x61 + 10
        case "A"..."F": scalar.value - 0x41 + 10
        default: nil
        }
    }
}
