import FuzzSupport
import PushCore

/// A legacy feedback-service dump (`pushctl feedback import`): the binary record stream.
///
/// Invariant: a stream that parses re-encodes to the same bytes, and its records are in order.
@main
enum FuzzLegacyFeedback {
    static func main() { FuzzDriver.run(fuzzLegacyFeedback) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLegacyFeedback(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = FuzzFixtures.bytes(start, count)
    let records: [LegacyFeedbackStream.Record]
    do {
        records = try LegacyFeedbackStream.parse(bytes)
    } catch {
        return FuzzFixtures.refused(error)
    }
    FuzzFixtures.accepted("\(records.count) records")
    guard LegacyFeedbackStream.encode(records.map { ($0.time, $0.token) }) == bytes else {
        FuzzFixtures.violated("\(records.count) parsed records do not encode back to the input")
    }
    guard zip(records, records.dropFirst()).allSatisfy({ $0.offset < $1.offset }) else {
        FuzzFixtures.violated("record offsets are not increasing")
    }
    _ = LegacyFeedbackStream.reports(records, app: "com.example.game")
    return 0
}
