/// A JSON value as push-render reads and writes it: objects keep their keys in order and numbers
/// keep their text, so a payload goes out exactly as it came in (`1.0` stays `1.0`, custom keys stay
/// in the order the publisher wrote them) and equal inputs give equal bytes.
///
/// Parsed with ``JSONValue/parse(_:maximumDepth:)`` and written with ``JSONValue/serialized()``
/// (compact, no whitespace). Foundation's `JSONSerialization` is not used: it reorders keys, turns
/// `1.0` into `1` and `true` into `1` on some platforms, and the payload size limit is about bytes.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number, as its JSON text (validated by the parser, e.g. `-1.5e3`).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members in document order; keys are unique (the parser rejects repeats).
    case object([(key: String, value: JSONValue)])

    /// A number from an integer.
    public static func integer(_ value: some BinaryInteger) -> JSONValue { .number(String(value)) }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .number(let text): hasher.combine(text)
        case .string(let text): hasher.combine(text)
        case .array(let values): hasher.combine(values)
        case .object(let members):
            for member in members {
                hasher.combine(member.key)
                hasher.combine(member.value)
            }
        }
    }

    /// The value of `key` when this is an object that has it.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    /// What kind of value this is, for error messages: `a string`, `an object`, ….
    public var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The number as an `Int64` when it is a whole number written without fraction or exponent.
    public var int64Value: Int64? {
        guard case .number(let text) = self else { return nil }
        return Int64(text)
    }

    /// The number as a `Double`.
    public var doubleValue: Double? {
        guard case .number(let text) = self else { return nil }
        return Double(text)
    }

    public var stringValue: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }
}
