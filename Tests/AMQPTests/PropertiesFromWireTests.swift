import CRabbitMQ
import Testing

@testable import AMQP

/// A delivery's content-header properties as they come off the wire, through rabbitmq-c's decoder
/// and the copy into Swift (``RabbitSession/properties(_:)``), without a broker: the path of
/// `fuzz-amqp-headers` (Fuzz/).
@Suite("AMQP properties from the wire")
struct PropertiesFromWireTests {
    /// The encoded properties of a message whose only property is `headers` = `{"x": value}`.
    static func headers(_ value: [UInt8]) -> [UInt8] {
        let entry: [UInt8] = [1, UInt8(ascii: "x")] + value
        return [0x20, 0x00] + bigEndian(UInt32(entry.count)) + entry
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// `depth` arrays, each holding the next; the innermost is empty.
    static func nestedArrays(depth: Int) -> [UInt8] {
        var value: [UInt8] = []
        // Each array holds the ones inside it: 5 bytes ('A' and the length) per level below.
        for level in 0..<depth { value += [UInt8(ascii: "A")] + bigEndian(UInt32(5 * (depth - 1 - level))) }
        return value
    }

    /// `depth` tables, each holding the next under the key `k`; the innermost is empty.
    static func nestedTables(depth: Int) -> [UInt8] {
        var value: [UInt8] = []
        // 'F', the length, then the entry's key (1 + 1 bytes): 7 bytes per level below.
        for level in 0..<depth {
            value += [UInt8(ascii: "F")] + bigEndian(UInt32(7 * (depth - 1 - level)))
            if level < depth - 1 { value += [1, UInt8(ascii: "k")] }
        }
        return value
    }

    static func decode(_ bytes: [UInt8]) -> AMQPProperties? {
        var pool = amqp_pool_t()
        init_amqp_pool(&pool, 131_072)
        defer { empty_amqp_pool(&pool) }
        var decoded: UnsafeMutableRawPointer?
        var bytes = bytes
        let status = bytes.withUnsafeMutableBytes { buffer in
            amqp_decode_properties(UInt16(AMQP_BASIC_CLASS), &pool, amqp_bytes_t(len: buffer.count, bytes: buffer.baseAddress), &decoded)
        }
        guard status >= 0, let decoded else { return nil }
        return RabbitSession.properties(decoded.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee)
    }

    /// How many arrays or tables hold one another from `value` down, and what the innermost holds.
    static func levels(_ value: AMQPFieldValue) -> (depth: Int, innermost: AMQPFieldValue?) {
        var depth = 0
        var value = value
        while true {
            switch value {
            case .array(let elements):
                depth += 1
                guard let first = elements.first else { return (depth, nil) }
                value = first
            case .table(let table):
                depth += 1
                guard let first = table["k"] else { return (depth, nil) }
                value = first
            default:
                return (depth, value)
            }
        }
    }

    /// A header of 26,000 nested arrays (130 KB, within one frame), which anyone who can publish may
    /// send, overflowed the stack of a debug build while it was copied into Swift (found with
    /// fuzz-amqp-headers and by the hostile catalogue): reading stops at the depth limit.
    @Test func deeplyNestedArraysStopAtTheDepthLimit() throws {
        let properties = try #require(Self.decode(Self.headers(Self.nestedArrays(depth: 26_000))))
        let (depth, innermost) = Self.levels(try #require(properties.headers["x"]))
        #expect(depth == AMQPFieldValue.maximumDepth)
        #expect(innermost == AMQPFieldValue.tooDeep)
    }

    @Test func deeplyNestedTablesStopAtTheDepthLimit() throws {
        let properties = try #require(Self.decode(Self.headers(Self.nestedTables(depth: 18_000))))
        let (depth, innermost) = Self.levels(try #require(properties.headers["x"]))
        #expect(depth == AMQPFieldValue.maximumDepth)
        #expect(innermost == AMQPFieldValue.tooDeep)
    }

    @Test func headersWithinTheLimitKeepTheirShape() throws {
        for value in [Self.nestedArrays(depth: AMQPFieldValue.maximumDepth), Self.nestedTables(depth: AMQPFieldValue.maximumDepth)] {
            let properties = try #require(Self.decode(Self.headers(value)))
            let (depth, innermost) = Self.levels(try #require(properties.headers["x"]))
            #expect(depth == AMQPFieldValue.maximumDepth && innermost == nil)
        }
    }
}
