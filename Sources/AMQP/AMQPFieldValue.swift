/// A value in an AMQP field table (message headers, queue and exchange arguments).
public enum AMQPFieldValue: Sendable, Hashable {
    case bool(Bool)
    case int8(Int8)
    case int16(Int16)
    case int32(Int32)
    case int64(Int64)
    case uint8(UInt8)
    case uint16(UInt16)
    case uint32(UInt32)
    case float(Float)
    case double(Double)
    case string(String)
    case bytes([UInt8])
    case timestamp(UInt64)
    case array([AMQPFieldValue])
    case table(AMQPTable)
    case void

    /// The value as text when it is a string (or UTF-8 bytes).
    public var stringValue: String? {
        switch self {
        case .string(let value): value
        case .bytes(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }

    /// The value as an integer when it is any integer kind.
    public var intValue: Int64? {
        switch self {
        case .int8(let value): Int64(value)
        case .int16(let value): Int64(value)
        case .int32(let value): Int64(value)
        case .int64(let value): value
        case .uint8(let value): Int64(value)
        case .uint16(let value): Int64(value)
        case .uint32(let value): Int64(value)
        case .timestamp(let value): Int64(clamping: value)
        default: nil
        }
    }
}

extension AMQPFieldValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    /// Integer literals are 64-bit signed, which RabbitMQ accepts for every numeric argument.
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

/// A field table: names to values. Order is not significant in AMQP.
public typealias AMQPTable = [String: AMQPFieldValue]

extension AMQPFieldValue {
    /// How deep tables and arrays in headers are read: deeper content (only a hostile producer sends
    /// it) becomes a note, since reading it recursively could exhaust the stack.
    public static let maximumDepth = 32

    /// What stands in for content deeper than ``maximumDepth``.
    public static let tooDeep = AMQPFieldValue.string("(nested deeper than \(maximumDepth) levels: not read)")
}
