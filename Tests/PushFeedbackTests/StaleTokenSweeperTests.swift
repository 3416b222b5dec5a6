import Foundation
import PushCore
import Redis
import TestSupport
import Testing
import TokenRegistry

@testable import PushFeedback

/// The stale-token sweep against the shared test Redis and RabbitMQ.
@Suite("Stale-token sweep against real Redis and RabbitMQ", .timeLimit(.minutes(2)))
struct StaleTokenSweeperTests {
    static let day: Int64 = 86_400_000
    static let now: Int64 = 100 * day

    func sweeper(_ fixture: FeedbackFixture, batch: Int = 7) -> StaleTokenSweeper {
        StaleTokenSweeper(
            remover: fixture.remover(),
            redis: fixture.redis,
            apps: [fixture.app],
            configuration: FeedbackConfiguration(
                staleDays: 30, sweepInterval: .seconds(3600), sweepRate: 100_000, sweepBatchSize: batch, keyPrefix: fixture.registry.keyPrefix),
            logger: FeedbackFixture.logger,
            now: { Self.now }
        )
    }

    @Test func onlyTokensNotRegisteredForTheStaleDaysAreRemoved() async throws {
        try await withFeedbackFixture("sweep") { fixture in
            var stale: [DeviceToken] = []
            var fresh: [DeviceToken] = []
            for index in 0..<40 {
                let token = fixture.token(index)
                if index % 2 == 0 {
                    try await fixture.register(token, user: "u\(index % 4)", topics: ["news"], at: Self.now - 31 * Self.day)
                    stale.append(token)
                } else {
                    try await fixture.register(token, user: "u\(index % 4)", topics: ["news"], at: Self.now - 29 * Self.day)
                    fresh.append(token)
                }
            }
            let sweeper = sweeper(fixture)
            let due = try await sweeper.sweep(app: fixture.app)
            #expect(due == Self.now + 3_600_000, "the next pass is an interval away")

            #expect(try await fixture.members(fixture.keys.tokens) == fresh.map(\.hex).sorted())
            #expect(try await fixture.members(fixture.keys.topic("news")) == fresh.map(\.hex).sorted())
            #expect(try await fixture.members(fixture.keys.user("u0")).isEmpty, "u0 had only stale tokens")
            #expect(try await fixture.members(fixture.keys.user("u1")).count == 10)
            let events = try await fixture.removedEvents(count: stale.count)
            #expect(Set(events.compactMap(\.token)) == Set(stale.map(\.hex)))
            #expect(events.allSatisfy { $0.reason == "Stale" && $0.app == fixture.app })

            let state = SweepKeys(prefix: fixture.registry.keyPrefix, app: fixture.app).state
            let saved = try await fixture.redis.execute("HMGET", state, "cursor", "last_pass_completed_at", "scanned", "removed").array?.map(\.string)
            #expect(saved == ["0", String(Self.now), "40", "20"])

            // Not due again within the interval: a token that turns stale meanwhile waits for the next pass.
            let late = fixture.token(999)
            try await fixture.register(late, at: 1)
            #expect(try await sweeper.sweep(app: fixture.app) == Self.now + 3_600_000)
            #expect(try await fixture.record(late) != nil)
        }
    }

    @Test func aPassResumesFromTheCursorKeptInRedis() async throws {
        try await withFeedbackFixture("resume") { fixture in
            let tokens = (0..<30).map { fixture.token($0) }
            for token in tokens { try await fixture.register(token, at: 1) }
            // A pass that stopped after its first step: the cursor of that step is in Redis, and the
            // step's tokens are gone (announced back then).
            let first = try await fixture.registry.tokenPage(app: fixture.app, cursor: "0", count: 5)
            #expect(first.next != "0")
            for token in first.tokens { try await fixture.registry.delete(app: fixture.app, token: token, at: 2) }
            let keys = SweepKeys(prefix: fixture.registry.keyPrefix, app: fixture.app)
            try await fixture.redis.execute(
                "HSET", keys.state, "cursor", first.next, "scanned", String(first.tokens.count), "removed", String(first.tokens.count))

            _ = try await sweeper(fixture, batch: 5).sweep(app: fixture.app)
            #expect(try await fixture.members(fixture.keys.tokens).isEmpty)
            let saved = try await fixture.redis.execute("HMGET", keys.state, "cursor", "scanned", "removed").array?.map(\.string)
            #expect(saved == ["0", "30", "30"], "the totals continue from the stored ones")
            let events = try await fixture.removedEvents(count: 30 - first.tokens.count)
            #expect(Set(events.compactMap(\.token)) == Set(tokens.map(\.hex)).subtracting(first.tokens.map(\.hex)))
        }
    }

    @Test func anAppAnotherInstanceIsSweepingIsSkipped() async throws {
        try await withFeedbackFixture("lease") { fixture in
            let token = fixture.token(1)
            try await fixture.register(token, at: 1)
            let keys = SweepKeys(prefix: fixture.registry.keyPrefix, app: fixture.app)
            try await fixture.redis.execute("SET", keys.lease, "another-instance", "PX", "60000")
            let due = try await sweeper(fixture).sweep(app: fixture.app)
            #expect(due == Self.now + 60_000, "tried again once the other's lease could have expired")
            #expect(try await fixture.record(token) != nil)
            #expect(try await fixture.redis.execute("GET", keys.lease).string == "another-instance")
        }
    }
}
