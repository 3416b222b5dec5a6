import AMQP
import Foundation
import PushCore
import PushServiceKit
import Redis
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import TokenRegistry

@testable import PushRender

/// push-render's consumer against the shared test RabbitMQ and Redis; fails when either is not running.
@Suite("push-render against real RabbitMQ and Redis", .timeLimit(.minutes(3)))
struct PushRequestConsumerTests {
    @Test func usersGetTheirEnvironmentLocaleAndSettings() async throws {
        try await withRenderFixture("users") { fixture in
            let aliceEN = fixture.token(1)
            let aliceDE = fixture.token(2)
            let bob = fixture.token(3)
            let carol = fixture.token(4)
            try await fixture.register(aliceEN, DeviceRegistration(user: "alice", locale: "en-US", environment: .production))
            try await fixture.register(
                aliceDE, DeviceRegistration(user: "alice", locale: "de_CH", environment: .sandbox, settings: NotificationSettings(sound: false)))
            try await fixture.register(bob, DeviceRegistration(user: "bob", locale: "zh-Hant-TW", settings: NotificationSettings(alert: false)))
            try await fixture.register(
                carol, DeviceRegistration(user: "carol", settings: NotificationSettings(alert: false, badge: false, sound: false)))
            let request = #"""
                {"id": "users-1", "app": "\#(fixture.app)", "to": {"users": ["alice", "bob", "carol", "nobody"]}, "localize": "server",
                 "payload": {"aps": {"alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]}, "badge": 2, "sound": "ping.aiff"}, "game": 7},
                 "expiration": 1767229200, "collapse_id": "game-7"}
                """#
            try await fixture.run { _ in
                try await fixture.publish(request)
                try await fixture.waitUntilDone("users-1")
            }
            let batches = try await fixture.drainBatches()
            var byToken: [String: SendBatch] = [:]
            for batch in batches {
                #expect(batch.requestID == "users-1")
                #expect(batch.app == fixture.app)
                #expect(batch.expiration == 1_767_229_200)
                #expect(batch.collapseID == "game-7")
                #expect(batch.attempt == 0)
                for token in batch.tokens { byToken[token] = batch }
            }
            #expect(Set(byToken.keys) == [aliceEN.hex, aliceDE.hex, bob.hex], "carol's device has nothing to show")
            #expect(byToken[aliceEN.hex]?.environment == .production)
            #expect(
                byToken[aliceEN.hex]?.payload
                    == #"{"aps":{"alert":{"body":"Jenna and Frank have invited you to play Monopoly"},"badge":2,"sound":"ping.aiff"},"game":7}"#)
            #expect(byToken[aliceDE.hex]?.environment == .sandbox)
            #expect(
                byToken[aliceDE.hex]?.payload == #"{"aps":{"alert":{"body":"Jenna und Frank haben dich zu Monopoly eingeladen"},"badge":2},"game":7}"#
            )
            #expect(byToken[bob.hex]?.environment == .production, "registered without one: the registry stored the default")
            #expect(byToken[bob.hex]?.payload == #"{"aps":{"badge":2,"sound":"ping.aiff"},"game":7}"#)
            #expect(Set(batches.map(\.batchID)) == Set((1...batches.count).map { "users-1/\($0)" }))
            let progress = try await fixture.progress("users-1")
            #expect(progress["tokens"] == "3")
            #expect(progress["skipped"] == "1")
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    @Test func listedTokensUnknownToTheRegistryGetTheAppDefaults() async throws {
        try await withRenderFixture("tokens") { fixture in
            let known = fixture.token(10)
            let unknown = fixture.token(11)
            try await fixture.register(known, DeviceRegistration(environment: .production, settings: NotificationSettings(badge: false)))
            try await fixture.run { _ in
                try await fixture.publish(
                    #"{"id": "tokens-1", "app": "\#(fixture.app)", "to": {"tokens": ["\#(known.hex)", "\#(unknown.hex.uppercased())"]}, "payload": {"aps": {"alert": "Hi", "badge": 1}}}"#
                )
                try await fixture.waitUntilDone("tokens-1")
            }
            let batches = try await fixture.drainBatches()
            #expect(batches.count == 2)
            let knownBatch = try #require(batches.first { $0.tokens == [known.hex] })
            #expect(knownBatch.environment == .production)
            #expect(knownBatch.payload == #"{"aps":{"alert":"Hi"}}"#)
            let unknownBatch = try #require(batches.first { $0.tokens == [unknown.hex] })
            #expect(unknownBatch.environment == .sandbox, "the app's default environment")
            #expect(unknownBatch.payload == #"{"aps":{"alert":"Hi","badge":1}}"#, "every part enabled")
        }
    }

    @Test func malformedRequestsAreDeadLetteredWithTheReasonAndLaterOnesStillRendered() async throws {
        try await withRenderFixture("invalid") { fixture in
            let token = fixture.token(20)
            try await fixture.register(token, DeviceRegistration(user: "dora"))
            let invalid: [(body: String, reason: String)] = [
                ("{not json", "body: is not valid JSON"),
                (
                    #"{"id": "x", "app": "com.example.unknown", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#,
                    "app: names no configured app"
                ),
                (
                    #"{"id": "x", "app": "\#(fixture.app)", "to": {"all": true}, "payload": {"aps": {"badge": "1"}}}"#,
                    "payload.aps.badge: must be a whole number"
                ),
                (
                    #"{"id": "x", "app": "\#(fixture.app)", "to": {"all": true}, "payload": {"aps": {"content-available": 1, "sound": "a"}}, "push_type": "background"}"#,
                    "payload.aps.sound: a background push carries only content-available"
                ),
                (
                    #"{"id": "x", "app": "\#(fixture.app)", "to": {"all": true}, "payload": {"aps": {"badge": 1}, "blob": "\#(String(repeating: "z", count: 4100))"}}"#,
                    "payload: the rendered payload is"
                ),
            ]
            try await fixture.run { _ in
                for (index, message) in invalid.enumerated() {
                    try await fixture.publish(message.body, headers: ["x-test-index": .int64(Int64(index))], messageID: "m-\(index)")
                }
                try await fixture.publish(
                    #"{"id": "after", "app": "\#(fixture.app)", "to": {"users": ["dora"]}, "payload": {"aps": {"alert": "still here"}}}"#)
                try await fixture.waitUntilDone("after")
                let dead = try await fixture.receive(from: fixture.names.dead, count: invalid.count)
                for delivery in dead {
                    let index = try #require(delivery.properties.headers["x-test-index"]?.intValue.map { Int($0) })
                    let reason = delivery.properties.headers[PushQueues.errorHeader]?.stringValue ?? ""
                    #expect(reason.hasPrefix(invalid[index].reason), "message \(index): \(reason)")
                    #expect(String(decoding: delivery.body, as: UTF8.self) == invalid[index].body, "the original body")
                    #expect(delivery.properties.messageID == "m-\(index)")
                }
            }
            let batches = try await fixture.drainBatches()
            #expect(batches.map(\.tokens) == [[token.hex]])
        }
    }

    /// Hostile-input catalogue (tests/system/test_hostile.py): a 128-character id of 4-byte characters makes
    /// batch ids over AMQP's 255-byte short string; used as the batches' message-id, it could not be
    /// encoded, the publish dropped push-render's broker connection, and the request came back until
    /// the delivery limit parked it (taking its neighbours' settlements down each time).
    @Test func aRequestIdOfLongCharactersStillGetsItsBatchesPublished() async throws {
        try await withRenderFixture("long-id") { fixture in
            let id = String(repeating: "😀", count: PushRequest.maximumIDLength)
            let combining = "e" + String(repeating: "\u{301}", count: 300)
            let token = fixture.token(1)
            try await fixture.run { _ in
                for requestID in [id, combining] {
                    try await fixture.publish(
                        #"{"id": "\#(requestID)", "app": "\#(fixture.app)", "to": {"tokens": ["\#(token.hex)"]}, "payload": {"aps": {"alert": "x"}}}"#
                    )
                }
                try await fixture.waitUntilDone(id)
                try await fixture.waitUntilDone(combining)
            }
            let deliveries = try await fixture.receive(from: fixture.names.send.name, count: 2)
            let batchIDs = try deliveries.map { try JSONDecoder().decode(SendBatch.self, from: Data($0.body)).batchID }
            #expect(Set(batchIDs) == [id + "/1", combining + "/1"])
            for delivery in deliveries {
                let messageID = try #require(delivery.properties.messageID)
                #expect(messageID.utf8.count <= SendBatch.maximumMessageIDBytes && messageID.contains("~"), "\(messageID.utf8.count) bytes")
            }
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    @Test func aRedeliveredRequestIsNotRenderedTwice() async throws {
        try await withRenderFixture("dedupe") { fixture in
            let tokens = (0..<30).map { fixture.token(100 + $0) }
            for token in tokens { try await fixture.register(token, DeviceRegistration(topics: ["news"])) }
            let request = #"{"id": "once", "app": "\#(fixture.app)", "to": {"topic": "news"}, "payload": {"aps": {"alert": "Extra!"}}}"#
            var configuration = fixture.configuration
            configuration.batchSize = 7
            try await fixture.run(configuration: configuration) { _ in
                try await fixture.publish(request)
                try await fixture.waitUntilDone("once")
                // The same request again, as after a redelivery or a publisher retry.
                try await fixture.publish(request)
                try await fixture.publish(request)
                try await fixture.waitUntilRequestsSettled()
                try await Task.sleep(for: .milliseconds(300))
            }
            let batches = try await fixture.drainBatches()
            #expect(batches.count == 5, "30 tokens in batches of 7, once")
            #expect(batches.allSatisfy { $0.tokens.count <= 7 })
            let sent = batches.flatMap(\.tokens)
            #expect(sent.count == 30)
            #expect(Set(sent) == Set(tokens.map(\.hex)))
        }
    }

    /// A fan-out that dies after some rounds (its lease left to expire, as after `kill -9`) is resumed
    /// by the redelivered request: the batches already published are not published again, the rest
    /// are, and the batch numbers carry on.
    @Test func aCrashedFanOutResumesWithoutResendingPublishedBatches() async throws {
        var configuration = RenderConfiguration(batchSize: 100, roundTokens: 1000, leaseDuration: .milliseconds(500))
        configuration.concurrency = 1
        try await withRenderFixture("resume", configuration: configuration) { fixture in
            let tokens = try await fixture.registerMany(5000, topic: "sale")
            let body = #"{"id": "resume-1", "app": "\#(fixture.app)", "to": {"topic": "sale"}, "payload": {"aps": {"alert": "Sale!"}}}"#
            let request = try PushRequest(body: Array(body.utf8), apps: fixture.apps)
            let store = fixture.store(leaseDuration: configuration.leaseDuration)
            guard case .claimed(let progress) = try await store.claim(app: fixture.app, requestID: request.id, owner: "crashed-instance") else {
                throw TestFailure("could not claim")
            }
            let fanOut = fixture.fanOut(request, store: store)
            let rounds = RoundCounter(limit: 2)
            let outcome = try await fanOut.run(from: progress, owner: "crashed-instance", shouldStop: { rounds.next() })
            guard case .stopped(let stopped) = outcome else { throw TestFailure("expected a stop, got \(outcome)") }
            let published = try await fixture.amqp.queueStatus(fixture.names.send.name).messages
            #expect(published == stopped.sequence)
            #expect(stopped.tokens >= 2000 && stopped.tokens < 5000)
            // The instance "dies" holding the lease; once it expires the redelivered request resumes.
            try await Task.sleep(for: .milliseconds(700))
            try await fixture.run { _ in
                try await fixture.publish(body)
                try await fixture.waitUntilDone("resume-1")
            }
            let batches = try await fixture.drainBatches()
            let sent = batches.flatMap(\.tokens)
            #expect(sent.count == 5000, "no token twice")
            #expect(Set(sent) == Set(tokens.map(\.hex)))
            #expect(batches.allSatisfy { $0.tokens.count <= 100 })
            let numbers = batches.compactMap { Int($0.batchID.split(separator: "/").last ?? "") }.sorted()
            #expect(numbers == Array(1...batches.count), "batch numbers carry on after the resume")
            #expect(try await fixture.progress("resume-1")["tokens"] == "5000")
        }
    }

    /// Found by `make chaos` (`kill -9` of push-render, 9,920 repeats of 100,000): the round a crash
    /// interrupted is scanned again on resume, and when push-feedback removed tokens in between, its
    /// tokens fell into other batches, whose mark sets push-send had never marked. The round's plan
    /// (saved before its batches are published) puts every token back into its first mark set and slot.
    @Test func aResumedRoundKeepsItsTokensDeliveryMarksThoughTheRegistryChanged() async throws {
        var configuration = RenderConfiguration(batchSize: 100, roundTokens: 1000, leaseDuration: .milliseconds(500))
        configuration.concurrency = 1
        try await withRenderFixture("replan", configuration: configuration) { fixture in
            let tokens = try await fixture.registerMany(5000, topic: "sale")
            let body = #"{"id": "replan-1", "app": "\#(fixture.app)", "to": {"topic": "sale"}, "payload": {"aps": {"alert": "Sale!"}}}"#
            let request = try PushRequest(body: Array(body.utf8), apps: fixture.apps)
            let store = fixture.store(leaseDuration: configuration.leaseDuration)
            guard case .claimed(let fresh) = try await store.claim(app: fixture.app, requestID: request.id, owner: "crashed") else {
                throw TestFailure("could not claim")
            }
            func fanOut() -> RequestFanOut { fixture.fanOut(request, store: store) }
            // Round 1 is published and saved; round 2 is published (and sent) and saved too, but the
            // progress is then set back to after round 1: as if the process died before saving it.
            guard
                case .stopped(let afterFirst) = try await fanOut().run(from: fresh, owner: "crashed", shouldStop: RoundCounter(limit: 1).next)
            else { throw TestFailure("expected a stop after round 1") }
            let firstRound = try await fixture.drainBatches()
            guard
                case .stopped = try await fanOut().run(from: afterFirst, owner: "crashed", shouldStop: RoundCounter(limit: 1).next)
            else { throw TestFailure("expected a stop after round 2") }
            let secondRound = try await fixture.drainBatches()
            #expect(!secondRound.isEmpty)
            #expect(try await store.save(app: fixture.app, requestID: request.id, owner: "crashed", progress: afterFirst, now: 1_000))
            var firstPlaces: [String: String] = [:]
            for batch in secondRound {
                for (index, token) in batch.tokens.enumerated() { firstPlaces[token] = "\(batch.effectiveMarkSet) \(batch.slot(at: index))" }
            }
            // Meanwhile push-feedback removes every third token of that round.
            var removed: Set<String> = []
            for (index, hex) in secondRound.flatMap(\.tokens).enumerated() where index % 3 == 0 {
                let token = try DeviceToken(normalizing: hex)
                let keys = try await fixture.keys(token)
                _ = try await fixture.redis.execute("SREM", keys.topic("sale"), hex)
                _ = try await fixture.redis.execute("SREM", keys.tokens, hex)
                _ = try await fixture.redis.execute("DEL", keys.record(token))
                removed.insert(hex)
            }
            try await Task.sleep(for: .milliseconds(700))
            try await fixture.run { _ in
                try await fixture.publish(body)
                try await fixture.waitUntilDone("replan-1")
            }
            let resumed = try await fixture.drainBatches()
            var moved: [String] = []
            var resent = 0
            for batch in resumed {
                for (index, token) in batch.tokens.enumerated() {
                    guard let first = firstPlaces[token] else { continue }
                    resent += 1
                    if first != "\(batch.effectiveMarkSet) \(batch.slot(at: index))" { moved.append(token) }
                }
            }
            #expect(resent == firstPlaces.count - removed.count, "the interrupted round is sent again (push-send's marks skip it)")
            #expect(moved.count == 0, "tokens of the interrupted round that lost their delivery marks")
            let all = (firstRound + resumed).flatMap(\.tokens)
            #expect(Set(all) == Set(tokens.map(\.hex)).subtracting(removed), "every registered token is sent")
            #expect(all.count == Set(all).count, "once")
            #expect(
                try await fixture.redis.execute("EXISTS", store.roundPlanKey(app: fixture.app, requestID: request.id)).integer == 0,
                "the plan is dropped when the request is done")
        }
    }

    /// Found by `make chaos` (Redis SHUTDOWN and start mid fan-out: 21% lost, 21% twice): a restarted
    /// Redis rebuilds its sets with a new hash seed, so a saved SSCAN cursor skips some members and
    /// repeats others. A cursor of another Redis run is dropped: the part is scanned again, skipping
    /// the tokens rendered before (their fingerprints are saved with every round).
    @Test func aCursorFromBeforeARedisRestartIsDroppedAndNoTokenSkipped() async throws {
        var configuration = RenderConfiguration(batchSize: 100, roundTokens: 1000, leaseDuration: .milliseconds(500))
        configuration.concurrency = 1
        try await withRenderFixture("restart", configuration: configuration) { fixture in
            let tokens = try await fixture.registerMany(5000, topic: "sale")
            let body = #"{"id": "restart-1", "app": "\#(fixture.app)", "to": {"topic": "sale"}, "payload": {"aps": {"alert": "Sale!"}}}"#
            let request = try PushRequest(body: Array(body.utf8), apps: fixture.apps)
            let store = fixture.store(leaseDuration: configuration.leaseDuration)
            guard case .claimed(let progress) = try await store.claim(app: fixture.app, requestID: request.id, owner: "first") else {
                throw TestFailure("could not claim")
            }
            let fanOut = fixture.fanOut(request, store: store)
            let rounds = RoundCounter(limit: 2)
            guard case .stopped(let stopped) = try await fanOut.run(from: progress, owner: "first", shouldStop: { rounds.next() })
            else {
                throw TestFailure("expected a stop")
            }
            // The saved position names the server each shard's cursor belongs to: this Redis's run_id.
            let saved = try #require(try await fixture.progress("restart-1")["position"])
            let position = try #require(TargetPosition(encoded: saved))
            let runIDs = Set(position.epochs.compactMap { $0 })
            #expect(runIDs.count == 1 && runIDs.first?.count == 40, "a Redis run_id: \(runIDs)")
            #expect(position.cursors.contains { $0 != nil && $0 != "0" }, "some shard is mid-scan: \(saved)")
            // As if Redis had restarted since: the saved cursors belong to another run.
            _ = try await fixture.redis.execute(
                "HSET", store.progressKey(app: fixture.app, requestID: request.id), "position",
                saved.replacingOccurrences(of: runIDs.first!, with: "a-previous-redis-run"))
            try await Task.sleep(for: .milliseconds(700))
            try await fixture.run { _ in
                try await fixture.publish(body)
                try await fixture.waitUntilDone("restart-1")
            }
            let sent = try await fixture.drainBatches().flatMap(\.tokens)
            #expect(Set(sent) == Set(tokens.map(\.hex)), "no token skipped")
            #expect(sent.count == 5000, "the part was scanned again from its start, and what was rendered before skipped: \(sent.count)")
            #expect(stopped.tokens >= 2000)
            #expect(
                try await fixture.redis.execute("EXISTS", store.renderedKey(app: fixture.app, requestID: request.id)).integer == 0,
                "dropped when done")
        }
    }

    /// An instance that stalled past its lease neither overwrites the new owner's round plan nor
    /// publishes its round.
    @Test func onlyTheLeaseHolderSavesARoundPlan() async throws {
        try await withRenderFixture("plan-lease") { fixture in
            let store = fixture.store(leaseDuration: .seconds(60))
            guard case .claimed = try await store.claim(app: fixture.app, requestID: "r", owner: "new-owner") else {
                throw TestFailure("could not claim")
            }
            var plan = RoundPlan(startSequence: 3)
            plan.add(markSet: "r/4#00", fingerprints: [5], slots: [0])
            #expect(!(try await store.saveRoundPlan(app: fixture.app, requestID: "r", owner: "stalled-owner", plan: plan)))
            #expect(try await store.roundPlan(app: fixture.app, requestID: "r") == nil, "nothing written")
            #expect(try await store.saveRoundPlan(app: fixture.app, requestID: "r", owner: "new-owner", plan: plan))
            #expect(try await store.roundPlan(app: fixture.app, requestID: "r") == plan)
        }
    }

    @Test func aLeaseOfAnEarlierDeliveryToThisProcessIsOurs() async throws {
        try await withRenderFixture("lease") { fixture in
            let store = fixture.store(leaseDuration: .seconds(60))
            guard case .claimed = try await store.claim(app: fixture.app, requestID: "r", owner: "host/1/7/41", instancePrefix: "host/1/7/") else {
                throw TestFailure("could not claim")
            }
            #expect(
                try await store.claim(app: fixture.app, requestID: "r", owner: "host/2/9/1", instancePrefix: "host/2/9/") == .busy, "another process")
            guard case .claimed = try await store.claim(app: fixture.app, requestID: "r", owner: "host/1/7/42", instancePrefix: "host/1/7/") else {
                throw TestFailure("a redelivery to the same process must get the request at once")
            }
        }
    }

    /// 100,000 tokens in one topic, streamed: no round holds more than `roundTokens` (+ one page), the
    /// process's memory stays bounded, every token is sent once, batches are full but for the ends of rounds.
    @Test func aHundredThousandTokenTopicStreamsWithBoundedMemory() async throws {
        let configuration = RenderConfiguration(batchSize: 500, roundTokens: 10_000)
        try await withRenderFixture("large", configuration: configuration) { fixture in
            let tokens = try await fixture.registerMany(100_000, topic: "everyone")
            let body =
                #"{"id": "large-1", "app": "\#(fixture.app)", "to": {"topic": "everyone"}, "localize": "server", "payload": {"aps": {"alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["A", "B"]}, "sound": "s.aiff"}}}"#
            let request = try PushRequest(body: Array(body.utf8), apps: fixture.apps)
            let store = fixture.store(leaseDuration: .seconds(60))
            guard case .claimed(let progress) = try await store.claim(app: fixture.app, requestID: request.id, owner: "test") else {
                throw TestFailure("could not claim")
            }
            let fanOut = fixture.fanOut(request, store: store)
            let baseline = residentMegabytes()
            let sampler = Task {
                var peak = 0
                while !Task.isCancelled {
                    peak = max(peak, residentMegabytes())
                    try? await Task.sleep(for: .milliseconds(20))
                }
                return peak
            }
            let outcome = try await fanOut.run(from: progress, owner: "test", shouldStop: { false })
            sampler.cancel()
            let peak = await sampler.value
            guard case .finished(let totals) = outcome else { throw TestFailure("expected the fan-out to finish, got \(outcome)") }
            #expect(totals.tokens == 100_000)
            #expect(fanOut.largestRoundTokens <= 10_000 + 2 * TokenRegistry.scanBatchSize, "a round holds about roundTokens tokens")
            #expect(peak - baseline < 150, "resident memory grew by \(peak - baseline) MB")

            let batches = try await fixture.drainBatches()
            let sent = batches.flatMap(\.tokens)
            #expect(sent.count == 100_000)
            #expect(Set(sent) == Set(tokens.map(\.hex)))
            #expect(batches.allSatisfy { $0.tokens.count <= 500 })
            // (environment × locale × sound) = 2 × 2 × 2 kinds; partial batches only at the ends of rounds.
            #expect(batches.count <= 100_000 / 500 + 8 * 11, "\(batches.count) batches")
            let german = try #require(batches.first { $0.payload.contains("eingeladen") })
            #expect(german.payload.hasPrefix(#"{"aps":{"alert":{"body":"A und B haben dich zu Monopoly eingeladen"}"#))
        }
    }

    /// SIGTERM mid-fan-out: the consumer stops after the round in flight is confirmed, gives the
    /// request back to the queue, and a new consumer finishes it; every token is sent exactly once.
    @Test func gracefulShutdownMidFanOutRequeuesTheRequestAndANewConsumerFinishesIt() async throws {
        /// Runs `services` and sets `reached` once the graceful shutdown has reached them: the shutdown
        /// manager sets the flag `Task.isShuttingDownGracefully` reads and calls every handler (the
        /// consumer's stop signal for its fan-outs among them) under one lock, so once it reads true
        /// the fan-outs have been told to stop.
        final class ObservedShutdown: Service {
            let services: [any Service]
            let reached = Mutex(false)

            init(services: [any Service]) { self.services = services }

            func run() async throws {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for service in services { group.addTask { try await service.run() } }
                    group.addTask {
                        while !Task.isShuttingDownGracefully, !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                        self.reached.withLock { $0 = true }
                    }
                    try await group.waitForAll()
                }
            }
        }

        let configuration = RenderConfiguration(batchSize: 50, roundTokens: 500)
        try await withRenderFixture("drain", configuration: configuration) { fixture in
            let tokens = try await fixture.registerMany(30_000, topic: "all-hands")
            let body = #"{"id": "drain-1", "app": "\#(fixture.app)", "to": {"topic": "all-hands"}, "payload": {"aps": {"alert": "Meeting"}}}"#
            // The shutdown must land in the middle of the fan-out whatever the machine's speed: once
            // some batches are out, Redis takes no writes (CLIENT PAUSE WRITE) until the shutdown has
            // reached the consumer, so no round can be saved and the fan-out cannot finish in between.
            // This push-render gets a Redis client of its own whose commands wait out the pause (the
            // fixture's 2 s command timeout would turn the pause into a Redis outage); the fixture's
            // client, which only reads and sends CLIENT commands meanwhile, stays the test's.
            let patientRedis = try await TestServers.connectRedis("command_timeout_ms=60000", logger: renderTestLogger)
            let dependencies = ServiceDependencies(
                amqp: fixture.amqp, redis: patientRedis, queues: fixture.names, keyPrefix: fixture.keyPrefix, logger: renderTestLogger,
                now: { 1_767_225_000_000 })
            let observed = ObservedShutdown(
                services: buildPushRender(dependencies, configuration: fixture.configuration, apps: fixture.apps, catalogs: fixture.catalogs))
            try await withCleanUp {
                try await withRunningServices([observed], logger: renderTestLogger, shutdownWithin: .seconds(15)) { group in
                    try await fixture.publish(body)
                    try await eventually("some batches are published") {
                        try await fixture.amqp.queueStatus(fixture.names.send.name).messages >= 20
                    }
                    // At most 30 s, so a test that fails here cannot leave the shared Redis paused.
                    #expect(try await fixture.redis.execute("CLIENT", "PAUSE", "30000", "WRITE").string == "OK")
                    await group.triggerGracefulShutdown()
                    try await eventually("the shutdown reached push-render", poll: .milliseconds(5)) { observed.reached.withLock { $0 } }
                    #expect(try await fixture.progress("drain-1")["state"] != "done", "the fan-out was still running at shutdown")
                    #expect(try await fixture.redis.execute("CLIENT", "UNPAUSE").string == "OK")
                }
                let progress = try await fixture.progress("drain-1")
                #expect(progress["state"] == "running", "stopped mid fan-out, not done: \(progress)")
                let rendered = try #require(Int(progress["tokens"] ?? ""), "progress names its tokens: \(progress)")
                #expect(rendered > 0 && rendered < 30_000, "\(rendered) of 30,000 tokens rendered before the shutdown")
                // The requeue is an asynchronous settle: give the broker a moment on a busy machine.
                try await eventually("the request went back to its queue") {
                    try await fixture.amqp.queueStatus(fixture.names.requests.name).messages == 1
                }
                #expect(try await fixture.amqp.queueStatus(fixture.names.requests.retryQueue(tier: 0)).messages == 0, "requeued, not retried")
                #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
                // A new push-render takes the requeued request and finishes what the first left.
                try await fixture.run { _ in try await fixture.waitUntilDone("drain-1") }
                try await fixture.waitUntilRequestsSettled()
                let batches = try await fixture.drainBatches()
                let sent = batches.flatMap(\.tokens)
                #expect(sent.count == 30_000, "no token twice, none lost: \(sent.count) sent")
                #expect(Set(sent).count == sent.count, "no token twice")
                #expect(Set(sent) == Set(tokens.map(\.hex)), "none lost")
            } cleanUp: {
                _ = try? await fixture.redis.execute("CLIENT", "UNPAUSE")
                await patientRedis.close()
            }
        }
    }

    /// The broker closes push-render's connection in the middle of a fan-out (issue 18, item 4): the
    /// request comes again after the reconnect, with delivery tags starting at 1 again, and its new
    /// claim gets an owner never used before (``LeaseOwners``); the fan-out resumes from its progress
    /// and every token is in exactly one batch.
    @Test func aReconnectMidFanOutSendsEveryTokenExactlyOnce() async throws {
        // Small batches and rounds: many confirmed publishes, so the close (rabbitmqctl takes a second
        // or so) lands in the middle.
        let configuration = RenderConfiguration(batchSize: 10, roundTokens: 100)
        try await withRenderFixture("reconnect", configuration: configuration) { fixture in
            let tokens = try await fixture.registerMany(120_000, topic: "all-hands")
            let body = #"{"id": "reconnect-1", "app": "\#(fixture.app)", "to": {"topic": "all-hands"}, "payload": {"aps": {"alert": "Meeting"}}}"#
            try await fixture.run { _ in
                try await fixture.publish(body)
                try await eventually("some batches are published") {
                    try await fixture.amqp.queueStatus(fixture.names.send.name).messages >= 100
                }
                let closed = try await TestServers.sharedBroker.closeConnections(matching: "render-tests")
                #expect(closed >= 1, "the broker closed push-render's connection")
                let progress = try await fixture.progress("reconnect-1")
                #expect(progress["state"] != "done", "closed in the middle of the fan-out")
                try await fixture.amqp.waitUntilConnected(timeout: .seconds(15))
                try await fixture.waitUntilDone("reconnect-1")
            }
            // A round whose confirms were lost with the connection is published again, with the same
            // batch ids and tokens: push-send's marks (per batch id and tokens) take such a copy for
            // the same batch and send nothing twice. What must hold: one batch id, one set of tokens,
            // and every token in exactly one batch id.
            let batches = try await fixture.drainBatches()
            var byID: [String: [String]] = [:]
            var conflicting = 0
            for batch in batches {
                if let earlier = byID[batch.batchID], earlier != batch.tokens { conflicting += 1 }
                byID[batch.batchID] = batch.tokens
            }
            #expect(conflicting == 0, "a batch id came again with other tokens")
            let sent = byID.values.flatMap { $0 }
            #expect(sent.count == 120_000, "no token in two batches, none lost: \(sent.count)")
            #expect(Set(sent).count == 120_000 && Set(sent) == Set(tokens.map(\.hex)))
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    /// Another instance holds the request's lease (it is rendering it): this one leaves it alone and
    /// sends the request through the retry tier, to find it done later.
    @Test func aRequestAnotherInstanceHoldsGoesToTheRetryTierAndIsLaterAckedAsDone() async throws {
        try await withRenderFixture("busy") { fixture in
            let store = fixture.store(leaseDuration: .seconds(30))
            guard case .claimed = try await store.claim(app: fixture.app, requestID: "busy-1", owner: "other-instance") else {
                throw TestFailure("could not claim")
            }
            let body = #"{"id": "busy-1", "app": "\#(fixture.app)", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#
            try await fixture.publish(body)
            let consumer = fixture.consumer()
            let delivery = try #require(try await fixture.receive(from: fixture.names.requests.name, count: 1).first)
            await consumer.process(delivery)
            let retried = try #require(try await fixture.receive(from: fixture.names.requests.retryQueue(tier: 0), count: 1).first)
            #expect(retried.properties.headers[DeliverySettler.retriesHeader]?.intValue == 1)
            // The other instance finishes; the retried copy is then acked without sending anything.
            #expect(
                try await store.save(app: fixture.app, requestID: "busy-1", owner: "other-instance", progress: RenderProgress(isDone: true), now: 1))
            #expect(
                try await store.save(app: fixture.app, requestID: "busy-1", owner: "stalled", progress: RenderProgress(), now: 2) == false,
                "a stalled owner cannot undo done")
            #expect(try await fixture.progress("busy-1")["state"] == "done")
            try await fixture.amqp.publish(
                AMQPOutboundMessage(exchange: "", routingKey: fixture.names.requests.name, body: retried.body, properties: retried.properties))
            let again = try #require(try await fixture.receive(from: fixture.names.requests.name, count: 1).first)
            await consumer.process(again)
            #expect(try await fixture.amqp.queueStatus(fixture.names.send.name).messages == 0)
            #expect(try await fixture.amqp.queueStatus(fixture.names.dead).messages == 0)
        }
    }

    @Test func redisOutageSendsTheRequestToARetryTier() async throws {
        try await withRenderFixture("outage") { fixture in
            let unreachable = try RedisConfiguration(url: "redis://127.0.0.1:1/0?connect_timeout_ms=200&command_timeout_ms=300&pool_size=1")
            let downRedis = RedisClient(configuration: unreachable, logger: renderTestLogger)
            let consumer = PushRequestConsumer(
                amqp: fixture.amqp, redis: downRedis, apps: fixture.apps, catalogs: fixture.catalogs, configuration: fixture.configuration,
                queues: fixture.names, logger: renderTestLogger)
            let body = #"{"id": "later", "app": "\#(fixture.app)", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#
            try await fixture.publish(body)
            let delivery = try #require(try await fixture.receive(from: fixture.names.requests.name, count: 1).first)
            await consumer.process(delivery)
            let tier = fixture.names.requests.retryQueue(tier: 0)
            let retried = try await fixture.receive(from: tier, count: 1)
            #expect(retried.first.map { String(decoding: $0.body, as: UTF8.self) } == body)
            #expect(retried.first?.properties.headers[DeliverySettler.retriesHeader]?.intValue == 1)
            await downRedis.close()
        }
    }
}

/// `shouldStop` for a fan-out: false for the first `limit` rounds, then true.
final class RoundCounter: Sendable {
    private let count = Mutex(0)
    let limit: Int
    init(limit: Int) { self.limit = limit }
    func next() -> Bool {
        count.withLock { count in
            count += 1
            return count > limit
        }
    }
}

/// This process's resident set (VmRSS) in MB.
func residentMegabytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) / 1024
    }
    return 0
}

/// A registry that moves from the single-tag layout to shards while a broadcast fans out over it:
/// the fan-out scans the old layout before the new one, so every device is sent to exactly once,
/// whether it moved before, during or after its part of the scan.
@Suite("Render during a registry migration", .serialized, .timeLimit(.minutes(2)))
struct RenderDuringMigrationTests {
    @Test func aTopicPushWhileTheRegistryMovesToShardsReachesEveryDeviceOnce() async throws {
        var configuration = RenderConfiguration(batchSize: 100, roundTokens: 500)
        configuration.concurrency = 1
        try await withRenderFixture("migrating", configuration: configuration) { fixture in
            let layoutKey = RegistryKeys.layoutKey(prefix: fixture.keyPrefix, app: fixture.app)
            try await fixture.redis.execute("HSET", layoutKey, "shards", "1")
            let tokens = try await fixture.registerMany(4000, topic: "sale")
            #expect(
                try await fixture.redis.execute("SCARD", RegistryLayout.legacy.keys(prefix: fixture.keyPrefix, app: fixture.app, shard: 0).tokens)
                    .integer == 4000)
            // The migration starts, and a quarter of the devices have moved already.
            try await fixture.redis.execute("HSET", layoutKey, "shards", "24", "from", "1")
            fixture.registry.layouts.invalidate(app: fixture.app)
            let target = RegistryLayout(shards: 24)
            for token in tokens[..<1000] { try await fixture.registry.moveDevice(app: fixture.app, device: token, from: .legacy, to: target) }
            let body = #"{"id": "migrating-1", "app": "\#(fixture.app)", "to": {"topic": "sale"}, "payload": {"aps": {"alert": "Sale!"}}}"#
            try await fixture.run { _ in
                try await fixture.publish(body)
                // The rest move while it fans out, in the order the scan of the old layout would meet them.
                for token in tokens[1000...] { try await fixture.registry.moveDevice(app: fixture.app, device: token, from: .legacy, to: target) }
                try await fixture.waitUntilDone("migrating-1")
            }
            let sent = try await fixture.drainBatches().flatMap(\.tokens)
            #expect(Set(sent) == Set(tokens.map(\.hex)), "every device: \(Set(tokens.map(\.hex)).subtracting(sent).count) missing")
            #expect(sent.count == 4000, "each once: \(sent.count)")
            let moved = try await fixture.registry.tokenCounts(app: fixture.app)
            #expect(moved.reduce(0) { $0 + $1.tokens } == 4000)
        }
    }
}
