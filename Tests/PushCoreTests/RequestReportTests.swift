import PushCore
import Testing

struct RequestReportTests {
    static let progressDone = ["state": "done", "sequence": "3", "tokens": "250", "skipped": "4", "started_at": "1767225000000"]

    @Test func assemblesCountsFromTheRenderProgressAndTheReportFields() throws {
        let report = try #require(
            RequestReport(
                id: "r", app: "com.example", progress: Self.progressDone,
                report: [
                    "m:r/1#aa": "100", "m:r/2#bb": "90", "m:r/3#cc": "45",
                    "b:r/1#aa": BatchTally(failed: [:], retried: 3).encoded,
                    "b:r/2#bb": BatchTally(failed: ["BadDeviceToken": 6, "Unregistered": 4]).encoded,
                    "b:r/3#cc": BatchTally(failed: ["Unregistered": 1], deferred: 2).encoded,
                    "first": "1767225001000", "last": "1767225009000", "queued_at": "1767224999000",
                ], removedTokens: 2))
        #expect(report.targeted == 254 && report.skipped == 4 && report.sent == 250 && report.batches == 3)
        #expect(report.delivered == 235)
        #expect(report.failed == ["BadDeviceToken": 6, "Unregistered": 5] && report.failedTotal == 11)
        #expect(report.retried == 3 && report.deferred == 2 && report.removed == 2)
        #expect(report.firstDeliveryAt == 1_767_225_001_000 && report.lastDeliveryAt == 1_767_225_009_000)
        #expect(report.queuedAt == 1_767_224_999_000 && report.startedAt == 1_767_225_000_000)
        #expect(report.state == .sending, "235 + 11 of 250 tokens have a final outcome")
    }

    @Test func sentIsTheLargerOfRendersCountAndTheTokensPushSendSettled() throws {
        let short = RequestReport(
            id: "r", app: "a", progress: ["state": "done", "tokens": "90"], report: ["n:x#1": "60", "n:y#2": "40", "m:x#1": "60", "m:y#2": "40"])
        #expect(short?.sent == 100 && short?.targeted == 100 && short?.state == .done)
        let early = RequestReport(id: "r", app: "a", progress: ["state": "done", "tokens": "100"], report: ["n:x#1": "60", "m:x#1": "60"])
        #expect(early?.sent == 100 && early?.state == .sending, "push-send has not settled every batch yet")
    }

    @Test func theStateFollowsRenderingAndFinalOutcomes() throws {
        #expect(RequestReport(id: "r", app: "a", progress: [:], report: [:]) == nil, "nothing known")
        #expect(RequestReport(id: "r", app: "a", progress: [:], report: ["queued_at": "1"])?.state == .queued)
        #expect(RequestReport(id: "r", app: "a", progress: ["state": "running", "tokens": "10"], report: [:])?.state == .rendering)
        let done = RequestReport(
            id: "r", app: "a", progress: ["state": "done", "tokens": "10"], report: ["m:x": "8", "b:x": BatchTally(failed: ["Expired": 2]).encoded])
        #expect(done?.state == .done)
        #expect(RequestReport(id: "r", app: "a", progress: ["state": "done", "tokens": "0"], report: [:])?.state == .done, "nobody to send to")
        let dead = RequestReport(id: "r", app: "a", progress: [:], report: ["dead": "payload: is required"])
        #expect(dead?.state == .dead && dead?.deadReason == "payload: is required")
        let fixed = RequestReport(id: "r", app: "a", progress: ["state": "running"], report: ["dead": "payload: is required"])
        #expect(fixed?.state == .rendering, "the id was published again, fixed, and push-render took it")
    }

    @Test func garbageInTheHashesCountsAsNothingAndHugeCountsCannotOverflow() throws {
        let report = try #require(
            RequestReport(
                id: "r", app: "a", progress: ["tokens": "-5", "sequence": "lots"],
                report: [
                    "m:1": "\(Int.max)", "m:2": "\(Int.max)", "m:3": "-1", "b:1": "f.X=\(Int.max);r=nope;d=-3;junk", "first": "soon",
                ]))
        #expect(report.sent == 0 && report.batches == 0)
        #expect(report.delivered == 1 << 40, "sums stop at the largest count, they never trap")
        #expect(report.failed == ["X": 1 << 40] && report.retried == 0 && report.deferred == 0)
        #expect(report.firstDeliveryAt == nil)
    }

    @Test func aTallyRoundTripsAndKeepsItsSeparatorsOutOfReasons() {
        let tally = BatchTally(failed: ["Unregistered": 2, "odd;name=x": 1], retried: 4, deferred: 5)
        #expect(tally.encoded == "f.Unregistered=2;f.odd_name_x=1;r=4;d=5")
        #expect(BatchTally(encoded: tally.encoded) == BatchTally(failed: ["Unregistered": 2, "odd_name_x": 1], retried: 4, deferred: 5))
        #expect(BatchTally().encoded == "")
        #expect(BatchTally(encoded: "") == BatchTally())
    }

    @Test func printsForTerminalsAndAsJSON() throws {
        let report = try #require(
            RequestReport(id: "order-1", app: "com.example", progress: Self.progressDone, report: ["m:a": "250", "first": "1767225001000"]))
        #expect(report.text.contains("state:      done"))
        #expect(report.text.contains("delivered:  250"))
        #expect(report.text.contains("first delivery: 2025-12-31T23:50:01.000Z"))
        #expect(report.json.contains(#""delivered":250"#) && report.json.contains(#""state":"done""#))
        #expect(report.json.contains(#""last_delivery_at":null"#))
    }
}
