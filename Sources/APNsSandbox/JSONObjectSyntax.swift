/// Checks that bytes are one JSON object (RFC 8259) in UTF-8, without building it: the sandbox
/// validates every payload this way on the hot path and keeps the bytes as they came.
///
/// Strict: no comments, trailing commas, leading zeros, control characters in strings or invalid
/// UTF-8; nesting deeper than ``maximumDepth`` is refused. Whitespace around the object is allowed.
enum JSONObjectSyntax {
    static let maximumDepth = 128

    static func isObject(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            scanner.skipWhitespace()
            guard scanner.peek == UInt8(ascii: "{"), scanner.value(depth: 0) else { return false }
            scanner.skipWhitespace()
            return scanner.isAtEnd
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        var isAtEnd: Bool { index >= bytes.count }
        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            index += 1
            return true
        }

        mutating func value(depth: Int) -> Bool {
            guard depth < JSONObjectSyntax.maximumDepth, let first = peek else { return false }
            switch first {
            case UInt8(ascii: "{"): return object(depth: depth + 1)
            case UInt8(ascii: "["): return array(depth: depth + 1)
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        mutating func object(depth: Int) -> Bool {
            index += 1  // {
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return true }
            while index < bytes.count {
                guard peek == UInt8(ascii: "\""), string() else { return false }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                guard value(depth: depth) else { return false }
                skipWhitespace()
                if consume(UInt8(ascii: "}")) { return true }
                guard consume(UInt8(ascii: ",")) else { return false }
                skipWhitespace()
            }
            return false
        }

        mutating func array(depth: Int) -> Bool {
            index += 1  // [
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return true }
            while index < bytes.count {
                guard value(depth: depth) else { return false }
                skipWhitespace()
                if consume(UInt8(ascii: "]")) { return true }
                guard consume(UInt8(ascii: ",")) else { return false }
                skipWhitespace()
            }
            return false
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                return false
            }
            index += count
            return true
        }

        mutating func digits() -> Int {
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                index += 1
            }
            return index - start
        }

        mutating func number() -> Bool {
            _ = consume(UInt8(ascii: "-"))
            if consume(UInt8(ascii: "0")) {
                // no leading zeros
            } else if digits() == 0 {
                return false
            }
            if consume(UInt8(ascii: ".")), digits() == 0 { return false }
            if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
                if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
                if digits() == 0 { return false }
            }
            return true
        }

        mutating func string() -> Bool {
            index += 1  // opening quote
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                case UInt8(ascii: "\\"):
                    guard escape() else { return false }
                case 0..<0x20:
                    return false
                case 0x20..<0x80:
                    index += 1
                default:
                    guard utf8Sequence() else { return false }
                }
            }
            return false
        }

        mutating func escape() -> Bool {
            index += 1  // backslash
            guard let kind = peek else { return false }
            index += 1
            switch kind {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                return true
            case UInt8(ascii: "u"):
                guard bytes.count - index >= 4 else { return false }
                for _ in 0..<4 {
                    switch bytes[index] {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                        UInt8(ascii: "A")...UInt8(ascii: "F"):
                        index += 1
                    default:
                        return false
                    }
                }
                return true
            default:
                return false
            }
        }

        /// One multi-byte UTF-8 sequence starting at `index` (lead byte ≥ 0x80), shortest form only,
        /// no surrogates, at most U+10FFFF.
        mutating func utf8Sequence() -> Bool {
            let lead = bytes[index]
            let continuation: Int
            var secondRange: ClosedRange<UInt8> = 0x80...0xBF
            switch lead {
            case 0xC2...0xDF: continuation = 1
            case 0xE0:
                continuation = 2
                secondRange = 0xA0...0xBF
            case 0xE1...0xEC, 0xEE...0xEF: continuation = 2
            case 0xED:
                continuation = 2
                secondRange = 0x80...0x9F
            case 0xF0:
                continuation = 3
                secondRange = 0x90...0xBF
            case 0xF1...0xF3: continuation = 3
            case 0xF4:
                continuation = 3
                secondRange = 0x80...0x8F
            default: return false
            }
            guard bytes.count - index > continuation, secondRange.contains(bytes[index + 1]) else { return false }
            for offset in stride(from: 2, through: continuation, by: 1) where !(0x80...0xBF).contains(bytes[index + offset]) {
                return false
            }
            index += continuation + 1
            return true
        }
    }
}
