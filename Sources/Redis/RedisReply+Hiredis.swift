import CHiredis

extension RedisReply {
    /// Converts a hiredis reply tree, recursively; the caller still frees it with `freeReplyObject`.
    ///
    /// The only place `redisReply` is read. hiredis 0.14 speaks RESP2, so these six types are all there
    /// is; a nil array (`*-1`) arrives as `REDIS_REPLY_NIL` and becomes ``null``.
    init(_ reply: UnsafePointer<redisReply>) {
        let node = reply.pointee
        switch node.type {
        case REDIS_REPLY_STRING:
            self = .bulk(Self.bytes(node.str, node.len))
        case REDIS_REPLY_STATUS:
            self = .status(String(decoding: Self.bytes(node.str, node.len), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            self = .error(String(decoding: Self.bytes(node.str, node.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(node.integer))
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            elements.reserveCapacity(node.elements)
            for index in 0..<node.elements {
                if let element = node.element?[index] {
                    elements.append(RedisReply(element))
                } else {
                    elements.append(.null)
                }
            }
            self = .array(elements)
        default:
            self = .error("unsupported hiredis reply type \(node.type)")
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ count: Int) -> [UInt8] {
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Parses raw RESP bytes with hiredis's own reader: the same conversion the connection uses, without a
    /// socket, so the reply mapping is unit-tested. Incomplete trailing input is ignored.
    static func parse(_ bytes: [UInt8]) throws(RedisError) -> [RedisReply] {
        let reader = HiredisReader()
        return try reader.parse(bytes)
    }
}

/// The one owner of a hiredis `redisReader` (the RESP parser without a connection).
private final class HiredisReader {
    private let reader: UnsafeMutablePointer<redisReader>

    init() {
        reader = redisReaderCreate()
    }

    deinit {
        redisReaderFree(reader)
    }

    func parse(_ bytes: [UInt8]) throws(RedisError) -> [RedisReply] {
        let fed = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
        }
        guard fed == REDIS_OK else { throw error() }
        var replies: [RedisReply] = []
        while true {
            var raw: UnsafeMutableRawPointer?
            guard redisReaderGetReply(reader, &raw) == REDIS_OK else { throw error() }
            guard let raw else { return replies }
            replies.append(RedisReply(raw.assumingMemoryBound(to: redisReply.self)))
            freeReplyObject(raw)
        }
    }

    private func error() -> RedisError {
        let cause = withUnsafeBytes(of: reader.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return RedisError(.protocolError, "invalid RESP: \(cause)")
    }
}
