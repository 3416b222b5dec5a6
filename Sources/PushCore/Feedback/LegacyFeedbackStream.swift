/// The binary stream of Apple's retired feedback service (the legacy binary provider API): repeated
/// records of
///
/// | bytes | value |
/// |---|---|
/// | 4 | time: when APNs found the app gone from the device, seconds since 1970, big-endian |
/// | 2 | token length N, big-endian (32 for every token that service ever sent) |
/// | N | the device token |
///
/// Operators who kept such dumps feed them to `pushctl feedback import`, which removes the tokens
/// under the same invalid-token rule as `push.feedback` events. Pure: parsing only.
public enum LegacyFeedbackStream {
    /// One record of the stream.
    public struct Record: Sendable, Hashable {
        /// Seconds since 1970.
        public var time: UInt32
        public var token: DeviceToken
        /// Where the record starts in the stream.
        public var offset: Int

        public init(time: UInt32, token: DeviceToken, offset: Int) {
            self.time = time
            self.token = token
            self.offset = offset
        }

        /// The moment the token was reported invalid, in ms since 1970.
        public var invalidSince: Int64 { Int64(time) * 1000 }
    }

    /// Bytes before each token: the time and the length.
    public static let headerSize = 6
    /// Token lengths accepted: 32 bytes is what APNs issued; up to 100 matches the 200 hex digits
    /// ``DeviceToken`` allows.
    public static let tokenLengths: ClosedRange<Int> = 32...100

    /// Parses the whole stream; an empty stream has no records.
    ///
    /// - Throws: ``FeedbackError`` with the offset of the record at fault —
    ///   ``FeedbackError/Code/truncatedStream`` when the bytes end inside a record,
    ///   ``FeedbackError/Code/corruptStream`` for a token length outside ``tokenLengths``. Nothing is
    ///   returned for a stream with an error anywhere, so callers apply all of it or none.
    public static func parse(_ bytes: [UInt8]) throws(FeedbackError) -> [Record] {
        var records: [Record] = []
        records.reserveCapacity(bytes.count / (headerSize + 32))
        var offset = 0
        while offset < bytes.count {
            let remaining = bytes.count - offset
            guard remaining >= headerSize else {
                throw FeedbackError(
                    .truncatedStream,
                    field: "stream",
                    "record \(records.count + 1) at byte \(offset) is cut short: its 6-byte header has only \(remaining) bytes",
                    offset: offset
                )
            }
            let time = UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
            let length = Int(bytes[offset + 4]) << 8 | Int(bytes[offset + 5])
            guard tokenLengths.contains(length) else {
                throw FeedbackError(
                    .corruptStream,
                    field: "stream",
                    "record \(records.count + 1) at byte \(offset) has a token length of \(length) bytes; tokens are \(tokenLengths.lowerBound)–\(tokenLengths.upperBound) bytes",
                    offset: offset
                )
            }
            guard remaining - headerSize >= length else {
                throw FeedbackError(
                    .truncatedStream,
                    field: "stream",
                    "record \(records.count + 1) at byte \(offset) is cut short: its \(length)-byte token has only \(remaining - headerSize) bytes",
                    offset: offset
                )
            }
            let start = offset + headerSize
            var hex = ""
            hex.reserveCapacity(length * 2)
            for byte in bytes[start..<start + length] {
                hex.unicodeScalars.append(hexDigits[Int(byte >> 4)])
                hex.unicodeScalars.append(hexDigits[Int(byte & 0x0F)])
            }
            // 32–100 bytes are 64–200 lowercase hex digits: always a valid token.
            let token = try! DeviceToken(normalizing: hex)
            records.append(Record(time: time, token: token, offset: offset))
            offset = start + length
        }
        return records
    }

    /// Encodes records as the feedback service sent them (for tests, benchmarks and tools that
    /// write such dumps).
    public static func encode(_ records: [(time: UInt32, token: DeviceToken)]) -> [UInt8] {
        var bytes: [UInt8] = []
        for (time, token) in records {
            bytes.append(contentsOf: [UInt8(time >> 24), UInt8(time >> 16 & 0xFF), UInt8(time >> 8 & 0xFF), UInt8(time & 0xFF)])
            let tokenBytes = token.bytes
            bytes.append(UInt8(tokenBytes.count >> 8))
            bytes.append(UInt8(tokenBytes.count & 0xFF))
            bytes.append(contentsOf: tokenBytes)
        }
        return bytes
    }

    /// The reports of `records` for `app`, one per token: a token listed more than once keeps its
    /// latest time (the rule only needs the newest moment it was known dead). In first-seen order.
    public static func reports(_ records: [Record], app: String) -> [InvalidTokenReport] {
        var index: [DeviceToken: Int] = [:]
        var reports: [InvalidTokenReport] = []
        for record in records {
            if let existing = index[record.token] {
                reports[existing].invalidSince = Swift.max(reports[existing].invalidSince, record.invalidSince)
            } else {
                index[record.token] = reports.count
                reports.append(
                    InvalidTokenReport(
                        app: app, token: record.token, reason: InvalidTokenReport.legacyFeedbackReason, invalidSince: record.invalidSince)
                )
            }
        }
        return reports
    }

    private static let hexDigits: [Unicode.Scalar] = Array("0123456789abcdef".unicodeScalars)
}

extension DeviceToken {
    /// The token's bytes (two hex digits each).
    public var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8?
        for digit in hex.utf8 {
            let value = digit <= 0x39 ? digit - 0x30 : digit - 0x57
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }
}
