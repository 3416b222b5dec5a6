import Foundation
import PushCore
import PushFeedback
import Redis
import TestSupport
import Testing
import TokenRegistry

/// The shared removal step and the legacy import, against the shared test Redis and RabbitMQ.
@Suite("Token removal and legacy feedback import against real Redis and RabbitMQ", .timeLimit(.minutes(2)))
struct TokenRemoverTests {
    @Test func aRemovalNoteLetsARepeatedReportAnnounceTheRemovalAgain() async throws {
        try await withFeedbackFixture("note") { fixture in
            let token = fixture.token(1)
            try await fixture.register(token, user: "dora", at: 1_000)
            let report = InvalidTokenReport(app: fixture.app, token: token, reason: "Unregistered", invalidSince: 2_000)
            let remover = fixture.remover()
            let first = try await remover.remove([report], now: 7_000, reannounce: { _ in false })
            #expect(try first[0].outcome.get() == .removed(user: "dora"))
            #expect(first[0].event == PushEvent.tokenRemoved(app: fixture.app, token: token.hex, reason: "Unregistered", at: 7_000))

            // Not a redelivery: nothing to announce.
            let duplicate = try await remover.remove([report], now: 8_000, reannounce: { _ in false })
            #expect(try duplicate[0].outcome.get() == .notFound(earlierRemoval: EarlierRemoval(at: 7_000, reason: "Unregistered")))
            #expect(duplicate[0].event == nil)
            // A redelivery (the first try may have died before its event was confirmed): announced again,
            // with the first removal's time and reason.
            let redelivered = try await remover.remove([report], now: 9_000, reannounce: { _ in true })
            #expect(redelivered[0].event == PushEvent.tokenRemoved(app: fixture.app, token: token.hex, reason: "Unregistered", at: 7_000))

            // Without notes nothing is remembered.
            let other = fixture.token(2)
            try await fixture.register(other, at: 1_000)
            let forgetful = fixture.remover(noteLifetime: .zero)
            let otherReport = InvalidTokenReport(app: fixture.app, token: other, reason: "BadDeviceToken", invalidSince: 2_000)
            _ = try await forgetful.remove([otherReport], now: 7_000, reannounce: { _ in true })
            #expect(
                try await forgetful.remove([otherReport], now: 8_000, reannounce: { _ in true })[0].outcome.get() == .notFound(earlierRemoval: nil))
            #expect(try await fixture.redis.execute("EXISTS", fixture.keys.removalNote(other)).integer == 0)
        }
    }

    @Test func aCorruptRecordFailsAloneAndTheRestOfTheBatchIsApplied() async throws {
        try await withFeedbackFixture("corrupt") { fixture in
            let good = fixture.token(1)
            let corrupt = fixture.token(2)
            try await fixture.register(good, at: 1_000)
            try await fixture.redis.execute("SET", fixture.keys.record(corrupt), "not a hash")
            let tally = try await fixture.remover().apply(
                [
                    InvalidTokenReport(app: fixture.app, token: corrupt, reason: "Unregistered", invalidSince: 2_000),
                    InvalidTokenReport(app: fixture.app, token: good, reason: "Unregistered", invalidSince: 2_000),
                ],
                now: 5_000,
                reannounce: false
            )
            #expect(tally.removed == 1 && tally.refused == 1)
            #expect(tally.refusals.first?.contains("wrong kind of value") == true, "\(tally.refusals)")
            #expect(try await fixture.record(good) == nil)
        }
    }

    @Test func aWellFormedLegacyStreamIsAppliedUnderTheRule() async throws {
        try await withFeedbackFixture("legacy") { fixture in
            let gone = fixture.token(1)
            let back = fixture.token(2)
            let unknown = fixture.token(3)
            try await fixture.register(gone, user: "erin", topics: ["news"], at: 1_000_000)
            try await fixture.register(back, user: "erin", at: 5_000_000)
            let stream = LegacyFeedbackStream.encode([
                (time: 2_000, token: gone), (time: 3_000, token: back), (time: 2_000, token: unknown), (time: 1_000, token: gone),
            ])
            let parsed = try LegacyFeedbackImport.reports(from: stream, app: fixture.app)
            #expect(parsed.records == 4)
            #expect(parsed.reports.count == 3, "a token listed twice counts once")
            var progress: [Int] = []
            let summary = try await LegacyFeedbackImport.apply(
                parsed.reports, records: parsed.records, remover: fixture.remover(), batchSize: 2, now: { 9_000_000 },
                progress: { progress.append($0) }
            )
            #expect(progress == [2, 3])
            #expect(summary.tally.removed == 1 && summary.tally.kept == 1 && summary.tally.notFound == 1)
            #expect(try await fixture.record(gone) == nil)
            #expect(try await fixture.record(back)?.updatedAt == 5_000_000, "registered at 5 000 s, after the report at 3 000 s")
            #expect(try await fixture.members(fixture.keys.user("erin")) == [back.hex])
            #expect(try await fixture.members(fixture.keys.topic("news")).isEmpty)
            let events = try await fixture.removedEvents(count: 1)
            #expect(events == [PushEvent.tokenRemoved(app: fixture.app, token: gone.hex, reason: "Unregistered", at: 9_000_000)])

            // A second run (as after one cut short) changes nothing and announces the removal again.
            let again = try await LegacyFeedbackImport.apply(parsed.reports, records: parsed.records, remover: fixture.remover(), now: { 9_500_000 })
            #expect(again.tally.removed == 0 && again.tally.kept == 1 && again.tally.notFound == 2)
            let repeated = try await fixture.removedEvents(count: 1)
            #expect(repeated == events, "announced again from its removal note, with the first removal's time")
            #expect(try await fixture.record(back)?.updatedAt == 5_000_000)
        }
    }

    @Test func aTruncatedLegacyStreamIsRefusedWithTheOffsetAndChangesNothing() async throws {
        try await withFeedbackFixture("truncated") { fixture in
            let first = fixture.token(1)
            let second = fixture.token(2)
            try await fixture.register(first, at: 1_000)
            try await fixture.register(second, at: 1_000)
            let whole = LegacyFeedbackStream.encode([(time: 2_000, token: first), (time: 2_000, token: second)])
            let truncated = Array(whole.dropLast(5))
            #expect(
                throws: FeedbackError(
                    .truncatedStream, field: "stream", "record 2 at byte 38 is cut short: its 32-byte token has only 27 bytes", offset: 38)
            ) {
                try LegacyFeedbackImport.reports(from: truncated, app: fixture.app)
            }
            #expect(try await fixture.members(fixture.keys.tokens) == [first.hex, second.hex].sorted(), "nothing was applied")
        }
    }
}
