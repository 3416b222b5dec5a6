import PushCore

/// The name/value pairs of a URL query or an `application/x-www-form-urlencoded` body, as the legacy
/// forms send them (`device_token=…&push_badge=enabled`).
///
/// Decoding follows the WHATWG `application/x-www-form-urlencoded` parser: pairs split on `&`, name and
/// value on the first `=`, `+` is a space and `%XX` a byte; the bytes must be UTF-8. Unlike a
/// forgiving browser, a broken `%` escape or invalid UTF-8 is an error naming the parameter, because
/// a token or credential that silently lost bytes would fail later with a worse message.
///
/// Bounded: at most ``maximumCount`` pairs (the input itself is bounded by the header and body caps).
/// A name given twice keeps its first value.
struct FormParameters: Sendable, Equatable {
    /// More pairs than any legacy client sends (ten); more is an error rather than work.
    static let maximumCount = 64

    private(set) var pairs: [(name: String, value: String)]

    init() {
        pairs = []
    }

    /// Decodes `encoded` (a query without its `?`, or a form body).
    init(urlEncoded encoded: some Collection<UInt8>) throws(RegistrationError) {
        pairs = []
        for piece in encoded.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = piece.firstIndex(of: UInt8(ascii: "="))
            let rawName = piece[piece.startIndex..<(equals ?? piece.endIndex)]
            let rawValue = equals.map { piece[piece.index(after: $0)...] } ?? piece[piece.endIndex...]
            let name = try Self.decode(rawName, field: nil)
            let value = try Self.decode(rawValue, field: name)
            if pairs.count == Self.maximumCount {
                throw RegistrationError(.invalidField, field: "form", "has more than \(Self.maximumCount) parameters")
            }
            pairs.append((name, value))
        }
    }

    /// The first value of `name`, or nil when absent.
    subscript(name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }

    /// These parameters, then those of `other` whose names are not here yet.
    func merging(_ other: FormParameters) -> FormParameters {
        var merged = self
        for pair in other.pairs where self[pair.name] == nil {
            merged.pairs.append(pair)
        }
        return merged
    }

    static func == (lhs: FormParameters, rhs: FormParameters) -> Bool {
        lhs.pairs.elementsEqual(rhs.pairs) { $0.name == $1.name && $0.value == $1.value }
    }

    /// `+` → space, `%XX` → byte, then UTF-8; `field` names the parameter in errors (nil while
    /// decoding a name).
    private static func decode(_ encoded: some Collection<UInt8>, field: String?) throws(RegistrationError) -> String {
        let field = field ?? "form"
        var bytes: [UInt8] = []
        bytes.reserveCapacity(encoded.count)
        var index = encoded.startIndex
        while index != encoded.endIndex {
            let byte = encoded[index]
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                let high = encoded.index(after: index)
                guard high != encoded.endIndex, let highValue = hexValue(encoded[high]) else {
                    throw RegistrationError(.invalidField, field: field, "has a '%' not followed by two hex digits")
                }
                let low = encoded.index(after: high)
                guard low != encoded.endIndex, let lowValue = hexValue(encoded[low]) else {
                    throw RegistrationError(.invalidField, field: field, "has a '%' not followed by two hex digits")
                }
                bytes.append(highValue << 4 | lowValue)
                index = low
            default:
                bytes.append(byte)
            }
            index = encoded.index(after: index)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw RegistrationError(.invalidField, field: field, "is not UTF-8 text")
        }
        return text
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
