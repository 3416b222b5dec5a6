import Foundation
import FuzzSupport

@testable import PushCore

/// A `push.feedback` body (an invalid-token report, CONTRACT.md) through push-feedback's decoding.
///
/// Invariant: the fast path (``InvalidTokenReport/quickEvent(_:)``) only answers for bodies
/// `JSONDecoder` decodes to the same event.
@main
enum FuzzInvalidTokenReport {
    static func main() { FuzzDriver.run(fuzzInvalidTokenReport) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInvalidTokenReport(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let body = FuzzFixtures.bytes(start, count)
    if let quick = InvalidTokenReport.quickEvent(body) {
        guard let decoded = try? JSONDecoder().decode(FeedbackEvent.self, from: Data(body)), decoded == quick else {
            FuzzFixtures.violated("quickEvent read \(quick), JSONDecoder does not agree")
        }
    }
    let report: InvalidTokenReport
    do {
        report = try InvalidTokenReport(feedbackBody: body)
    } catch {
        return FuzzFixtures.refused(error)
    }
    FuzzFixtures.accepted("report \(report.reason) since \(report.invalidSince)")
    guard !report.app.isEmpty, InvalidTokenReport.apnsReasons.contains(report.reason), report.invalidSince >= 0 else {
        FuzzFixtures.violated("accepted a report the rule refuses: \(report)")
    }
    return 0
}
