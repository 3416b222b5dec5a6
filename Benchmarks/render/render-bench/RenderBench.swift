import AMQP
import ArgumentParser
import Foundation
import Logging
import PushCore
import PushServiceKit
import Redis
import TestSupport
import TokenRegistry

/// push-render under a broadcast: an `{"all": true}` push request over N registered tokens, rendered
/// by the real `push-render` executable (a child process) into send batches on `push.send`.
///
/// Fills Redis with N token records written directly with pipelined `HSET`/`SADD` (the registry's
/// layout, see `RegistryKeys`), unless the app's token set already holds N; publishes one request
/// with server-side localisation; reports the time from publish to the request's progress record
/// saying `done` (every batch confirmed), batches and tokens per second, and push-render's peak RSS
/// (`VmHWM`). Then it reads every batch back and checks that each token came exactly once.
///
/// Run through `make bench-render`, which starts a private RabbitMQ and Redis and stops them after.
/// With `--fill-only` it only fills Redis (the token records of `make bench-broadcast`, which runs the
/// real push-render and push-send itself) and exits.
@main
struct RenderBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render-bench",
        abstract: "Measure push-render fanning one {\"all\": true} request out over N registered tokens."
    )

    @Option(help: "RabbitMQ URL (default: PUSH_AMQP_URL).")
    var amqpURL: String?

    @Option(help: "Redis URL (default: PUSH_REDIS_URL).")
    var redisURL: String?

    @Option(help: "Registered tokens.")
    var tokens = 1_000_000

    @Option(help: "Tokens per send batch (PUSH_RENDER_BATCH_SIZE).")
    var batchSize = 500

    @Flag(help: "Skip reading the batches back.")
    var noVerify = false

    @Flag(
        help: "Only fill Redis with the token records (unless it already holds them), then exit: no RabbitMQ, no push-render (make bench-broadcast).")
    var fillOnly = false

    @Option(help: "Device locales, comma-separated, assigned to the tokens in turn.")
    var locales = "en-US,de-DE,zh-Hant-TW,fr-FR,en-GB,de-AT"

    @Option(help: "Every Nth token is registered for the sandbox environment, the others for production (0: none).")
    var sandboxEvery = 10

    @Option(help: "The registry's shards (PUSH_REGISTRY_SHARDS; 1 is the single-tag layout of registries made before shards).")
    var shards = RegistryLayout.defaultShards

    func validate() throws {
        guard tokens > 0 else { throw ValidationError("--tokens must be positive") }
        guard sandboxEvery >= 0 else { throw ValidationError("--sandbox-every must be 0 or more") }
        guard !localeList.isEmpty else { throw ValidationError("--locales names no locale") }
        guard (1...RegistryLayout.maximumShards).contains(shards) else { throw ValidationError("--shards must be 1–\(RegistryLayout.maximumShards)") }
    }

    private var localeList: [String] {
        locales.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static let app = "com.example.bench"

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let amqpURL = self.amqpURL ?? environment["PUSH_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
        let redisURL = self.redisURL ?? environment["PUSH_REDIS_URL"] ?? "redis://127.0.0.1:6379/0"
        var logger = Logger(label: "render-bench")
        logger.logLevel = .warning
        let redis = try await RedisClient.connect(configuration: RedisConfiguration(url: redisURL), logger: logger)
        try await fill(redis: redis)
        if fillOnly {
            await redis.close()
            return
        }

        let amqp = AMQPConnection(
            configuration: try AMQPConfiguration(url: amqpURL, connectionName: "render-bench"), topology: .push, logger: logger)
        try await amqp.waitUntilConnected(timeout: .seconds(30))
        for queue in [PushQueues.standard.send.name, PushQueues.standard.dead, PushQueues.standard.requests.name] {
            _ = try await amqp.deleteQueue(queue)
        }
        try await amqp.declare(.push)

        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let appsFile = FileManager.default.temporaryDirectory.appendingPathComponent("render-bench-apps-\(getpid()).json").path
        try Data(
            #"{"apps": {"\#(Self.app)": {"environment": "production", "apns": {"key_file": "AuthKey_BENCH00001.p8", "key_id": "BENCH00001", "team_id": "TEAM000001"}}}}"#
                .utf8
        ).write(to: URL(fileURLWithPath: appsFile))
        defer { try? FileManager.default.removeItem(atPath: appsFile) }
        let executable = RenderBenchPaths.productsDirectory.appendingPathComponent("push-render").path
        let child = try ChildProcess(
            [executable],
            environment: [
                "PUSH_AMQP_URL": amqpURL, "PUSH_REDIS_URL": redisURL, "PUSH_APPS_FILE": appsFile,
                "PUSH_LOCALIZATION_DIR": root.appendingPathComponent("localization").path, "PUSH_HTTP_PORT": String(TestServers.freePort()),
                "PUSH_HTTP_HOST": "127.0.0.1", "PUSH_LOG_LEVEL": "notice", "PUSH_RENDER_BATCH_SIZE": String(batchSize),
            ])
        defer { child.signal(SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(30)
        while try await amqp.queueStatus(PushQueues.standard.requests.name).consumers == 0 {
            guard ContinuousClock.now < deadline else { throw ChildProcessError("push-render did not start consuming:\n\(child.output)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let idleRSS = Self.memory(pid: child.pid, field: "VmRSS")
        // Measure rendering, not Redis housekeeping: let an AOF rewrite the fill set off finish first.
        while let info = try await redis.execute("INFO", "persistence").string,
            info.contains("aof_rewrite_in_progress:1") || info.contains("aof_rewrite_scheduled:1")
        {
            try await Task.sleep(for: .milliseconds(200))
        }
        let cpuBefore = Self.cpuSeconds(pid: child.pid)

        let requestID = "bench-\(UInt32.random(in: 0...UInt32.max))"
        let request = #"""
            {"id": "\#(requestID)", "app": "\#(Self.app)", "to": {"all": true}, "localize": "server",
             "payload": {"aps": {"alert": {"title-loc-key": "SHIPPED_TITLE", "loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]},
             "badge": 1, "sound": "default"}, "gameID": "12345678"}}
            """#
        print("push-render: \(tokens) registered tokens, batches of \(batchSize), idle RSS \(idleRSS / 1024) MB")
        let started = ContinuousClock.now
        try await amqp.publish(
            AMQPOutboundMessage(
                exchange: PushQueues.standard.exchange, routingKey: PushQueues.standard.requests.routingKey, body: Array(request.utf8)))
        let progressKey = "push:{\(Self.app)}:render:\(requestID)"
        var peakSampled = 0
        while true {
            peakSampled = max(peakSampled, Self.memory(pid: child.pid, field: "VmRSS"))
            let state = try await redis.execute("HGET", progressKey, "state").string
            if state == "done" { break }
            if ContinuousClock.now - started > .seconds(300) { throw ChildProcessError("not done within 300 s:\n\(child.output)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let elapsed = ContinuousClock.now - started
        let peak = Self.memory(pid: child.pid, field: "VmHWM")
        let cpu = Self.cpuSeconds(pid: child.pid) - cpuBefore
        let progress = try await redis.execute("HMGET", progressKey, "sequence", "tokens", "skipped").array?.map { $0.string ?? "?" } ?? []
        let batches = Int(progress.first ?? "") ?? 0
        let rendered = Int(progress.dropFirst().first ?? "") ?? 0
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            String(
                format: "rendered %d tokens into %d send batches in %.2f s: %.0f tokens/s, %.0f batches/s; skipped %@",
                rendered, batches, seconds, Double(rendered) / seconds, Double(batches) / seconds, progress.last ?? "?"))
        print("push-render peak RSS \(peak / 1024) MB (sampled during the run: \(peakSampled / 1024) MB), CPU \(String(format: "%.2f", cpu)) s")
        child.signal(SIGTERM)
        let status = await child.waitForExit(timeout: .seconds(30))
        print("push-render exited with \(status.map(String.init) ?? "no exit within 30 s") after SIGTERM")

        if !noVerify {
            try await verify(amqp: amqp, batches: batches)
        }
        await amqp.close()
        await redis.close()
    }

    /// Writes `tokens` records and the app's token sets in the registry's layout (``shards`` shards,
    /// each device in its own), unless the sets already hold that many. On a single Redis the
    /// database is emptied first; a Redis Cluster is expected new.
    private func fill(redis: RedisClient) async throws {
        let layout = RegistryLayout(shards: shards)
        let all = layout.allKeys(prefix: "push", app: Self.app)
        let existing = try await redis.pipeline(all.map { RedisCommand(["SCARD", $0.tokens]) }).reduce(0) { $0 + Int($1.integer ?? 0) }
        let layoutKey = RegistryKeys.layoutKey(prefix: "push", app: Self.app)
        if existing == tokens, try await redis.execute("HGET", layoutKey, "shards").string == String(shards) {
            print("Redis already holds \(tokens) tokens of \(Self.app) in \(layout)")
            return
        }
        if !redis.configuration.isCluster { _ = try await redis.execute("FLUSHDB") }
        try await redis.execute("HSET", layoutKey, "shards", String(shards))
        let started = ContinuousClock.now
        let locales = localeList
        let chunk = 1000
        var index = 0
        while index < tokens {
            var commands: [RedisCommand] = []
            commands.reserveCapacity(chunk + all.count)
            var members: [Int: RedisCommand] = [:]
            for i in index..<min(tokens, index + chunk) {
                let hex = Self.token(i)
                let device = try DeviceToken(normalizing: hex)
                let shard = layout.shard(of: device)
                members[shard, default: RedisCommand(["SADD", all[shard].tokens])].append(hex)
                commands.append(
                    RedisCommand([
                        "HSET", all[shard].record(device), "locale", locales[i % locales.count],
                        "environment", sandboxEvery > 0 && i % sandboxEvery == 0 ? "sandbox" : "production", "topics", "[]",
                        "alert", "1", "badge", i % 7 == 0 ? "0" : "1", "sound", "1",
                        "registered_at", "1767225600000", "updated_at", "1767225600000",
                    ]))
            }
            commands.append(contentsOf: members.values)
            for reply in try await redis.pipeline(commands) {
                if let error = reply.errorMessage { throw ChildProcessError("filling Redis: \(error)") }
            }
            index += chunk
        }
        let sandbox = sandboxEvery > 0 ? (tokens + sandboxEvery - 1) / sandboxEvery : 0
        print(
            "filled Redis with \(tokens) tokens in \(ContinuousClock.now - started) (\(layout); locales \(locales.joined(separator: ", ")); "
                + "\(tokens - sandbox) production, \(sandbox) sandbox)")
    }

    /// Reads every batch off `push.send` and checks each token came exactly once.
    private func verify(amqp: AMQPConnection, batches: Int) async throws {
        let consumer = amqp.consume(queue: PushQueues.standard.send.name, prefetch: 500)
        var seen = Set<String>()
        seen.reserveCapacity(tokens)
        var duplicates = 0
        var received = 0
        let decoder = JSONDecoder()
        for try await delivery in consumer {
            let batch = try decoder.decode(SendBatch.self, from: Data(delivery.body))
            for token in batch.tokens where !seen.insert(token).inserted { duplicates += 1 }
            delivery.ack()
            received += 1
            if received == batches { break }
        }
        consumer.cancel()
        print("verified: \(received) batches, \(seen.count) distinct tokens, \(duplicates) repeated")
    }

    /// A deterministic 64-hex-digit token for index `i`.
    static func token(_ i: Int) -> String {
        func mix(_ value: UInt64) -> UInt64 {
            var z = value &+ 0x9e37_79b9_7f4a_7c15
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
        func hex(_ value: UInt64) -> String {
            let text = String(value, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }
        let seed = UInt64(i)
        return hex(mix(seed)) + hex(mix(seed ^ 0xabcdef)) + hex(mix(seed &+ 77)) + hex(seed)
    }

    /// User + system CPU seconds of `pid` so far (`/proc/<pid>/stat` fields 14 and 15, in clock ticks).
    static func cpuSeconds(pid: pid_t) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let afterName = stat.range(of: ") ", options: .backwards)
        else { return 0 }
        let fields = stat[afterName.upperBound...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A `/proc/<pid>/status` field in kB (0 when unreadable).
    static func memory(pid: pid_t, field: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}

enum RenderBenchPaths {
    static var productsDirectory: URL { URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent() }
}
