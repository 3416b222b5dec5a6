import Foundation

/// A small, strict JSON reader for the bodies push-ingest reads on every registration: a top-level
/// object of strings, booleans, nulls, arrays and objects, into the `[String: Any]` shape the
/// registration checks read (`String`, `Bool`, `NSNull`, `[Any]`, `[String: Any]`), at a fraction of
/// `JSONSerialization`'s cost.
///
/// It only ever answers for input it fully understands and returns nil for everything else — a syntax
/// error, a number (no registration field is one; with `integers`, anything but a plain integer that
/// fits an `Int64`), invalid UTF-8, a lone surrogate escape, a repeated
/// key, nesting deeper than ``maximumDepth`` — so the caller hands such bodies to the full parser
/// (``JSONValue/parse(_:maximumDepth:)``), whose verdict (and error message) stays the rule. Fast for
/// the valid common case.
enum JSONObjectReader {
    /// Deeper bodies go to the full parser (no registration nests more than two levels).
    static let maximumDepth = 16

    /// - Parameter integers: also read integers (`-?(0|[1-9][0-9]*)`, fitting an `Int64`) as `Int64`.
    static func object(_ bytes: [UInt8], integers: Bool = false) -> [String: Any]? {
        bytes.withUnsafeBufferPointer { buffer -> [String: Any]? in
            var reader = Cursor(bytes: buffer, integers: integers)
            reader.skipWhitespace()
            guard reader.peek() == UInt8(ascii: "{"), let object = reader.readObject(depth: 1) else { return nil }
            reader.skipWhitespace()
            return reader.atEnd ? object : nil
        }
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        let integers: Bool
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>, integers: Bool) {
            self.bytes = bytes
            self.integers = integers
        }

        var atEnd: Bool { index >= bytes.count }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func consume(literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            let start = literal.utf8Start
            for offset in 0..<count where bytes[index + offset] != start[offset] { return false }
            index += count
            return true
        }

        mutating func readValue(depth: Int) -> Any? {
            guard let byte = peek() else { return nil }
            switch byte {
            case UInt8(ascii: "\""): return readString()
            case UInt8(ascii: "{"): return readObject(depth: depth + 1)
            case UInt8(ascii: "["): return readArray(depth: depth + 1)
            case UInt8(ascii: "t"): return consume(literal: "true") ? true : nil
            case UInt8(ascii: "f"): return consume(literal: "false") ? false : nil
            case UInt8(ascii: "n"): return consume(literal: "null") ? NSNull() : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integers ? readInteger() : nil
            default: return nil
            }
        }

        /// A plain integer; nil for fractions, exponents, leading zeros and values past `Int64`.
        mutating func readInteger() -> Int64? {
            let negative = consume(UInt8(ascii: "-"))
            let start = index
            var magnitude: UInt64 = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                let (times, overflowTimes) = magnitude.multipliedReportingOverflow(by: 10)
                let (plus, overflowPlus) = times.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
                guard !overflowTimes, !overflowPlus else { return nil }
                magnitude = plus
                index += 1
            }
            let digits = index - start
            guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
            if let next = peek(), next == UInt8(ascii: ".") || next == UInt8(ascii: "e") || next == UInt8(ascii: "E") { return nil }
            if negative {
                return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil
            }
            return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
        }

        mutating func readObject(depth: Int) -> [String: Any]? {
            guard depth <= JSONObjectReader.maximumDepth, consume(UInt8(ascii: "{")) else { return nil }
            var object: [String: Any] = [:]
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return object }
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "\""), let key = readString() else { return nil }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                guard let value = readValue(depth: depth) else { return nil }
                guard object.updateValue(value, forKey: key) == nil else { return nil }
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "}")) ? object : nil
            }
        }

        mutating func readArray(depth: Int) -> [Any]? {
            guard depth <= JSONObjectReader.maximumDepth, consume(UInt8(ascii: "[")) else { return nil }
            var array: [Any] = []
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return array }
            while true {
                skipWhitespace()
                guard let value = readValue(depth: depth) else { return nil }
                array.append(value)
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "]")) ? array : nil
            }
        }

        /// A string at the cursor (which is on its opening quote).
        mutating func readString() -> String? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            // The common case: no escapes, so the bytes are the string.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            var scalars: [UInt8] = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: scalars, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                    case UInt8(ascii: "b"): scalars.append(0x08)
                    case UInt8(ascii: "f"): scalars.append(0x0C)
                    case UInt8(ascii: "n"): scalars.append(0x0A)
                    case UInt8(ascii: "r"): scalars.append(0x0D)
                    case UInt8(ascii: "t"): scalars.append(0x09)
                    case UInt8(ascii: "u"):
                        guard var value = readHex4() else { return nil }
                        if (0xD800...0xDBFF).contains(value) {
                            guard consume(UInt8(ascii: "\\")), consume(UInt8(ascii: "u")), let low = readHex4(), (0xDC00...0xDFFF).contains(low)
                            else {
                                return nil
                            }
                            value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(value) {
                            return nil
                        }
                        guard let scalar = Unicode.Scalar(value) else { return nil }
                        scalars.append(contentsOf: UTF8.encode(scalar)!)
                    default:
                        return nil
                    }
                default:
                    if byte < 0x20 { return nil }
                    scalars.append(byte)
                }
            }
            return nil
        }

        mutating func readHex4() -> UInt32? {
            guard bytes.count - index >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                index += 1
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
    }
}
