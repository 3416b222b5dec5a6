import AMQP
import Foundation
import PushCore
import PushSend
import Redis
import TestSupport
import Testing

/// push-send under trouble, with 20,000 tokens each: apns-sandbox faults (5% 503 `Shutdown`, 5% 500,
/// 5% 429, GOAWAY every 1,000 streams), and `kill -9` of the built executable in the middle of a run.
@Suite("push-send under faults and kill -9", .serialized, .timeLimit(.minutes(6)))
struct SendResilienceTests {
    static let tokenCount = 20_000
    static let batchSize = 500

    static func batches(_ fixture: SendServiceFixture, tokens: [String]) -> [SendBatch] {
        let requestID = UUID().uuidString
        return stride(from: 0, to: tokens.count, by: batchSize).map { start in
            fixture.batch(Array(tokens[start..<min(start + batchSize, tokens.count)]), requestID: requestID, sequence: start / batchSize)
        }
    }

    @Test func sandboxFaultsLoseNothing() async throws {
        // The 500s wait 30 s here rather than Apple's 15 minutes, so the test ends in minutes.
        let send = SendConfiguration(prefetch: 20, drainTimeout: .seconds(5), serverErrorRetry: .seconds(30))
        try await withSendService("faults", send: send) { fixture in
            try await fixture.setFault(#"{"status": 503, "rate": 0.05, "reason": "Shutdown"}"#)
            try await fixture.setFault(#"{"status": 500, "rate": 0.05}"#)
            try await fixture.setFault(#"{"status": 429, "rate": 0.05}"#)
            try await fixture.setFault(#"{"goaway_every": 1000}"#)
            let tokens = SendServiceFixture.tokens(Self.tokenCount)
            try await fixture.publish(Self.batches(fixture, tokens: tokens))
            try await fixture.run { _ in
                // Under the faults until the first pass and its retries are through (15% of every try
                // fails: the Shutdowns come back after 1 s, the 500s and 429s after 30 s, and a few
                // tokens fail three or four times and wait in the 2 min tier); then the faults end so
                // the test does not wait for the 10 min tier.
                try await eventually("most tokens delivered through the faults", timeout: .seconds(120)) {
                    try await fixture.acceptedCount() >= Self.tokenCount * 97 / 100
                }
                _ = try await fixture.sandbox.admin("DELETE", "/faults")
                try await eventually("every token delivered", timeout: .seconds(200)) {
                    try await fixture.acceptedCount() >= Self.tokenCount
                }
            }
            let counts = try await fixture.deliveriesByToken()
            #expect(counts.count == Self.tokenCount, "every token delivered")
            #expect(Set(counts.keys) == Set(tokens))
            let stats = try await fixture.stats()
            let byStatus = stats["by_status"] as? [String: Any] ?? [:]
            #expect(
                [byStatus["503"], byStatus["500"], byStatus["429"]].allSatisfy { (number($0) ?? 0) > 500 }, "the faults happened: \(stats)")
            #expect((number(stats["goaways"]) ?? 0) >= 10, "\(stats)")
            let duplicates = (number(stats["delivered"]) ?? 0) - Self.tokenCount
            #expect(duplicates <= Self.tokenCount / 1000, "duplicates: \(duplicates)")
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
            #expect(try await fixture.messages(in: fixture.names.send.name) == 0)
        }
    }

    /// Measured before the fix: with answers after 150 ms a broker-closed connection repeated 30% of
    /// the push (the redelivered batches were sent again while their first copies were in flight).
    @Test func aConnectionTheBrokerClosesRepeatsNothingAtApplesLatency() async throws {
        // A ceiling of 500 in flight over 150 ms: about 3,300 a second, so the close (rabbitmqctl takes
        // a second or two) lands in the middle of the push, with every batch taken by push-send.
        try await withSendService("broker-close", send: SendConfiguration(prefetch: 40, maxInFlight: 500, drainTimeout: .seconds(5))) { fixture in
            try await fixture.setFault(#"{"delay_ms": 150}"#)
            let tokens = SendServiceFixture.tokens(Self.tokenCount)
            try await fixture.publish(Self.batches(fixture, tokens: tokens))
            try await fixture.run { _ in
                try await eventually("a tenth of the tokens are delivered", timeout: .seconds(60)) {
                    try await fixture.acceptedCount() >= Self.tokenCount / 10
                }
                let closed = try await TestServers.sharedBroker.closeConnections(matching: "push-send-tests")
                #expect(closed >= 1, "the broker closed push-send's connection")
                let atClose = try await fixture.acceptedCount()
                #expect(atClose < Self.tokenCount * 9 / 10, "closed in the middle: \(atClose) delivered")
                try await eventually("every token delivered", timeout: .seconds(120), poll: .milliseconds(100)) {
                    try await fixture.deliveriesByToken().count == Self.tokenCount
                }
                try await eventually("push.send is empty") {
                    try await fixture.messages(in: fixture.names.send.name) == 0
                }
            }
            let duplicates = try await fixture.acceptedCount() - Self.tokenCount
            print("broker closed push-send's connection at 150 ms latency: \(duplicates) duplicates of \(Self.tokenCount)")
            #expect(duplicates <= Self.tokenCount / 1000, "duplicates: \(duplicates) (at most 0.1% where no process died)")
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
        }
    }

    /// Another copy of a redelivered batch may still be sending (a push-send whose broker connection
    /// dropped, answering after APNs' round trip): the marks it writes while this copy sends are read
    /// before each chunk, so what it got accepted is not sent again.
    @Test func aRedeliveredBatchSkipsWhatAnotherCopyGotAcceptedWhileItSends() async throws {
        try await withSendService("reread", send: SendConfiguration(prefetch: 1, maxInFlight: 20, minInFlight: 20, drainTimeout: .seconds(5))) {
            fixture in
            try await fixture.setFault(#"{"delay_ms": 100}"#)
            let tokens = SendServiceFixture.tokens(300)
            let batch = fixture.batch(tokens)
            try await fixture.publish(batch)
            // Delivered once and returned: the copy push-send gets is a redelivery.
            try await withAMQPConnection(name: "push-send-tests-redeliver") { connection in
                let taken = try #require(
                    try await connection.receive(from: fixture.names.send.name, count: 1, timeout: .seconds(10), ack: false).first)
                taken.nack(requeue: true)
                try await Task.sleep(for: .milliseconds(200))
            }
            let markKey = DeliveryLedger(redis: fixture.redis, ttl: .seconds(60)).key(app: fixture.app, markSet: batch.effectiveMarkSet)
            try await fixture.run { _ in
                // 20 in flight, 100 ms each: 300 tokens take 1.5 s. The other copy's marks for the last
                // 100 arrive while the first ones are on the wire.
                try await eventually("sending started") { try await fixture.acceptedCount() > 0 }
                let marks = (200..<300).map { RedisCommand(["SETBIT", markKey, String(DeliveryMarks.acceptedBit(slot: $0)), "1"]) }
                _ = try await fixture.redis.pipeline(marks)
                try await eventually("the batch is done") {
                    let left = try await fixture.messages(in: fixture.names.send.name)
                    let accepted = try await fixture.acceptedCount()
                    return left == 0 && accepted >= 200
                }
                try await Task.sleep(for: .milliseconds(500))
            }
            let delivered = try await fixture.deliveriesByToken()
            #expect(delivered.count == 200, "sent: \(delivered.count) of 300")
            let skipped = Set(tokens.suffix(100))
            #expect(delivered.keys.filter { skipped.contains($0) }.count == 0, "the other copy's tokens were skipped")
            #expect(delivered.values.allSatisfy { $0 == 1 })
        }
    }

    @Test func killDashNineMidRunThenRestartDeliversEverythingWithFewDuplicates() async throws {
        let executable = TestServers.productsDirectory.appendingPathComponent("push-send").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestFailure("\(executable) is not built (swift test builds every product)")
        }
        try await withSendService("kill") { fixture in
            let appsFile = fixture.directory.appendingPathComponent("apps.json").path
            let keyFile = fixture.directory.appendingPathComponent("AuthKey.p8").path
            try
                #"{"apps": {"\#(fixture.app)": {"apns": {"key_file": "\#(keyFile)", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"}, "rate_limits": {"per_device_per_hour": 1000, "per_app_per_second": 1000000}}}}"#
                .write(toFile: appsFile, atomically: true, encoding: .utf8)
            let tokens = SendServiceFixture.tokens(Self.tokenCount)
            try await fixture.publish(Self.batches(fixture, tokens: tokens))
            let environment = [
                "PUSH_AMQP_URL": TestServers.amqpURL, "PUSH_REDIS_URL": TestServers.redisURL, "PUSH_APPS_FILE": appsFile,
                "PUSH_APNS_ENDPOINT": fixture.sandbox.endpointURL, "PUSH_APNS_CA_FILE": fixture.sandbox.caFile,
                "PUSH_SEND_QUEUE_PREFIX": fixture.names.prefix, "PUSH_HTTP_HOST": "127.0.0.1", "PUSH_LOG_LEVEL": "warning",
                // What a kill -9 can repeat: notifications sent and not yet settled. 0.1% of the run.
                "PUSH_SEND_MAX_IN_FLIGHT": String(Self.tokenCount / 1000),
            ]

            let first = try ChildProcess([executable], environment: environment.merging(["PUSH_HTTP_PORT": String(TestServers.freePort())]) { $1 })
            try await eventually("a third of the tokens are delivered", timeout: .seconds(60)) {
                if let status = first.status { throw TestFailure("push-send exited with \(status):\n\(first.output)") }
                return try await fixture.acceptedCount() >= Self.tokenCount / 3
            }
            first.signal(SIGKILL)
            #expect(await first.waitForExit(timeout: .seconds(10)) == 128 + SIGKILL)
            let atKill = try await fixture.acceptedCount()
            #expect(atKill < Self.tokenCount, "killed in the middle: \(atKill) delivered")

            let adminPort = TestServers.freePort()
            let second = try ChildProcess([executable], environment: environment.merging(["PUSH_HTTP_PORT": String(adminPort)]) { $1 })
            try await eventually("every token delivered after the restart", timeout: .seconds(120), poll: .milliseconds(100)) {
                if let status = second.status { throw TestFailure("push-send exited with \(status):\n\(second.output)") }
                return try await fixture.deliveriesByToken().count == Self.tokenCount
            }
            try await eventually("push.send is empty") {
                try await fixture.messages(in: fixture.names.send.name) == 0
            }
            let metrics = try await SandboxProcess.curl(
                url: "http://127.0.0.1:\(adminPort)/metrics", method: "GET", headers: [], body: nil, arguments: [], directory: fixture.directory
            )
            for name in [
                "push_send_delivered_total", "push_send_notifications_sent_total", "push_send_apns_latency_seconds_bucket",
                "push_send_open_connections", "push_send_in_flight", "push_send_window_size", "push_send_batches_total",
                "push_send_delivered_total{app=\"", "push_dependency_up{dependency=\"rabbitmq\"}", "push_dependency_up{dependency=\"redis\"}",
            ] {
                #expect(metrics.body.contains(name), "\(name) in /metrics")
            }
            // The batches in flight at the kill come again; what the first run got accepted of them is skipped.
            let skipped = metrics.body.split(separator: "\n").first { $0.hasPrefix("push_send_duplicates_skipped_total ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
            #expect((skipped ?? 0) > 0, "the restart skipped what the first run had delivered: \(skipped.map { "\($0)" } ?? "no metric")")
            second.signal(SIGTERM)
            #expect(await second.waitForExit(timeout: .seconds(40)) == 0, "\(second.output)")

            let delivered = try await fixture.acceptedCount()
            let duplicates = delivered - Self.tokenCount
            print("kill -9 at \(atKill) of \(Self.tokenCount) accepted; after the restart \(delivered) accepted: \(duplicates) duplicates")
            #expect(duplicates <= Self.tokenCount / 1000, "duplicates: \(duplicates) (at most 0.1%)")
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
        }
    }
}
