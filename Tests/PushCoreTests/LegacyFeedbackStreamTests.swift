import TestSupport
import Testing

@testable import PushCore

@Suite struct LegacyFeedbackStreamTests {
    let first = try! DeviceToken(normalizing: String(repeating: "ab", count: 32))
    let second = try! DeviceToken(normalizing: String(repeating: "0f", count: 32))

    @Test func aWellFormedStreamGivesEveryRecordWithItsOffset() throws {
        var bytes: [UInt8] = [0x5F, 0x5E, 0x10, 0x00, 0x00, 0x20]
        bytes += [UInt8](repeating: 0xAB, count: 32)
        bytes += [0x00, 0x00, 0x00, 0x01, 0x00, 0x20]
        bytes += [UInt8](repeating: 0x0F, count: 32)
        let records = try LegacyFeedbackStream.parse(bytes)
        #expect(
            records == [
                LegacyFeedbackStream.Record(time: 0x5F5E_1000, token: first, offset: 0),
                LegacyFeedbackStream.Record(time: 1, token: second, offset: 38),
            ])
        #expect(records[0].invalidSince == 1_600_000_000_000)
        #expect(LegacyFeedbackStream.encode([(0x5F5E_1000, first), (1, second)]) == bytes, "encode is parse's inverse")
    }

    @Test func anEmptyStreamHasNoRecords() throws {
        #expect(try LegacyFeedbackStream.parse([]).isEmpty)
    }

    @Test func longerTokensUpTo100BytesAreAccepted() throws {
        let long = try DeviceToken(normalizing: String(repeating: "cd", count: 100))
        let records = try LegacyFeedbackStream.parse(LegacyFeedbackStream.encode([(7, long)]))
        #expect(records.map(\.token) == [long])
    }

    @Test func aStreamCutInAHeaderNamesTheRecordAndOffset() {
        let bytes = LegacyFeedbackStream.encode([(1, first)]) + [0x00, 0x00, 0x01]
        #expect(
            throws: FeedbackError(
                .truncatedStream, field: "stream", "record 2 at byte 38 is cut short: its 6-byte header has only 3 bytes", offset: 38)
        ) {
            try LegacyFeedbackStream.parse(bytes)
        }
    }

    @Test func aStreamCutInATokenNamesTheRecordAndOffset() {
        let bytes = Array(LegacyFeedbackStream.encode([(1, first)]).dropLast(1))
        #expect(
            throws: FeedbackError(
                .truncatedStream, field: "stream", "record 1 at byte 0 is cut short: its 32-byte token has only 31 bytes", offset: 0)
        ) {
            try LegacyFeedbackStream.parse(bytes)
        }
    }

    @Test func anImpossibleTokenLengthIsCorruption() {
        let bytes = LegacyFeedbackStream.encode([(1, first)]) + [0x00, 0x00, 0x00, 0x01, 0x00, 0x00]
        #expect(
            throws: FeedbackError(
                .corruptStream, field: "stream", "record 2 at byte 38 has a token length of 0 bytes; tokens are 32–100 bytes", offset: 38)
        ) {
            try LegacyFeedbackStream.parse(bytes)
        }
        let huge: [UInt8] = [0, 0, 0, 1, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 70_000)
        #expect((try? LegacyFeedbackStream.parse(huge)) == nil)
    }

    @Test func reportsKeepTheLatestTimeOfATokenListedTwice() {
        let records = [
            LegacyFeedbackStream.Record(time: 5, token: first, offset: 0),
            LegacyFeedbackStream.Record(time: 3, token: second, offset: 38),
            LegacyFeedbackStream.Record(time: 9, token: first, offset: 76),
        ]
        #expect(
            LegacyFeedbackStream.reports(records, app: "com.example.game") == [
                InvalidTokenReport(app: "com.example.game", token: first, reason: "Unregistered", invalidSince: 9_000),
                InvalidTokenReport(app: "com.example.game", token: second, reason: "Unregistered", invalidSince: 3_000),
            ])
    }

    @Test func tokenBytesRoundTrip() {
        #expect(first.bytes == [UInt8](repeating: 0xAB, count: 32))
    }
}

/// Random and cut-up streams: the parser never traps, and either returns records that tile the
/// stream or names an offset inside it.
@Suite struct LegacyFeedbackStreamFuzzTests {
    @Test func randomStreamsParseOrFailAtAnOffsetInside() {
        var generator = SplitMix64(seed: 0xFEED_BAC4)
        let token = try! DeviceToken(normalizing: String(repeating: "5a", count: 32))
        for round in 0..<3000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int(generator.next() % 200)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            } else {
                // A valid stream, cut at a random place and with a random byte changed.
                bytes = LegacyFeedbackStream.encode(Array(repeating: (UInt32(round), token), count: Int(generator.next() % 5) + 1))
                bytes = Array(bytes.prefix(Int(generator.next() % UInt64(bytes.count + 1))))
                if !bytes.isEmpty, generator.next() % 2 == 0 {
                    bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            }
            do {
                let records = try LegacyFeedbackStream.parse(bytes)
                let consumed = records.reduce(0) { $0 + LegacyFeedbackStream.headerSize + $1.token.hex.utf8.count / 2 }
                #expect(consumed == bytes.count, "round \(round)")
            } catch {
                let offset = error.offset ?? -1
                #expect(offset >= 0 && offset < bytes.count, "round \(round): \(error)")
            }
        }
    }
}
