import APNs
import ArgumentParser
import Foundation
import Logging
import Synchronization

extension PushctlCommand {
    /// `pushctl bench`: how fast this provider's APNs client sends, against apns-sandbox (or any
    /// APNs-compatible server) — notifications/s, latency percentiles and errors by reason.
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send N notifications with a fixed small alert and print notifications/s, p50/p99 latency and errors by reason.",
            discussion: """
                Without --key-file a throw-away signing key is used (apns-sandbox without --public-key accepts it).
                Only point it at servers you own: it sends as fast as it can.

                Example:
                  pushctl bench --endpoint https://127.0.0.1:2197 --ca-file .local/apns-sandbox/ca.pem --count 200000 --concurrency 1000 --connections 2
                """
        )

        @OptionGroup var apns: APNsOptions

        @Option(help: "Notifications to send.")
        var count: Int = 100_000

        @Option(help: "Notifications in flight at once.")
        var concurrency: Int = 1000

        @Option(help: "HTTP/2 connections.")
        var connections: Int = 2

        @Option(help: "apns-topic (a bundle id).")
        var topic: String = "com.example.bench"

        @Option(help: "Distinct random device tokens to cycle through.")
        var tokens: Int = 1000

        @Flag(help: "Print the figures as JSON.")
        var json = false

        func validate() throws {
            guard (1...100_000_000).contains(count) else { throw ValidationError("--count must be 1–100000000") }
            guard (1...100_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1–100000") }
            guard (1...64).contains(connections) else { throw ValidationError("--connections must be 1–64") }
            guard (1...1_000_000).contains(tokens) else { throw ValidationError("--tokens must be 1–1000000") }
        }

        func run() async throws {
            var configuration = try apns.clientConfiguration(ephemeralKeyAllowed: true)
            configuration.connections = connections
            configuration.maximumPendingRequests = max(concurrency * 2, 1000)
            let client = try APNsClient(configuration: configuration, logger: Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() }))
            let deviceTokens = (0..<tokens).map { _ in Self.randomDeviceToken() }
            let payload = Array(#"{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushctl bench"},"sound":"default"}}"#.utf8)
            let topic = self.topic
            let count = self.count

            // Warm-up: open the connections and mint the token outside the measurement.
            _ = try? await client.send(APNsNotification(deviceToken: deviceTokens[0], topic: topic, payload: payload))

            // The completion-handler API push-send uses (SendBatchProcessor): no task and no
            // continuation per notification. Each answer sends the next notification, so
            // `concurrency` stay in flight, as h2load's `-m` keeps its streams busy.
            let run = BenchRun(
                client: client, deviceTokens: deviceTokens, topic: topic, payload: payload, count: count
            )
            let started = ContinuousClock.now
            let results = await run.start(concurrency: min(concurrency, count))
            let elapsed = Self.milliseconds(ContinuousClock.now - started) / 1000
            await client.shutdown()
            print(Self.report(results, count: count, seconds: elapsed, json: json, connections: connections, concurrency: concurrency))
            if results.accepted == 0 { throw ExitCode(1) }
        }

        /// Sends `count` notifications with at most `concurrency` in flight: each completion records
        /// its result and sends the next one, on the client's connection thread.
        final class BenchRun: Sendable {
            private let client: APNsClient
            private let deviceTokens: [String]
            private let topic: String
            private let payload: [UInt8]
            private let count: Int
            /// The next notification's index (0, 1, 2, …).
            private let next = Atomic<Int>(0)
            /// Sends owed by completions; whoever raises it from 0 sends them all (see ``sendOwed(_:)``).
            private let owed = Atomic<Int>(0)
            private let state = Mutex<State>(State())

            private struct State {
                var result = BenchResult()
                var completed = 0
                var continuation: CheckedContinuation<BenchResult, Never>?
            }

            init(client: APNsClient, deviceTokens: [String], topic: String, payload: [UInt8], count: Int) {
                self.client = client
                self.deviceTokens = deviceTokens
                self.topic = topic
                self.payload = payload
                self.count = count
                state.withLock { $0.result.latencies.reserveCapacity(min(count, 1 << 22)) }
            }

            /// Returns once every notification completed.
            func start(concurrency: Int) async -> BenchResult {
                await withCheckedContinuation { continuation in
                    state.withLock { $0.continuation = continuation }
                    sendOwed(concurrency)
                }
            }

            /// Sends `number` more notifications. A completion that runs inside `send` (a request
            /// refused before it was queued) only adds to `owed`, which the loop already running
            /// sends, so failures never recurse.
            private func sendOwed(_ number: Int) {
                guard owed.add(number, ordering: .acquiringAndReleasing).oldValue == 0 else { return }
                var remaining = number
                while remaining > 0 {
                    sendOne()
                    remaining = owed.subtract(1, ordering: .acquiringAndReleasing).newValue
                }
            }

            private func sendOne() {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < count else { return }
                let notification = APNsNotification(deviceToken: deviceTokens[index % deviceTokens.count], topic: topic, payload: payload)
                let sentAt = ContinuousClock.now
                client.send(notification) { [self] result in
                    let latency = Bench.milliseconds(ContinuousClock.now - sentAt)
                    let finished = state.withLock { state -> (BenchResult, CheckedContinuation<BenchResult, Never>)? in
                        switch result {
                        case .success(let response) where response.status == 200:
                            state.result.latencies.append(latency)
                            state.result.accepted += 1
                        case .success(let response):
                            state.result.latencies.append(latency)
                            state.result.errors["\(response.status) \(response.reason?.rawValue ?? "")", default: 0] += 1
                        case .failure(let error):
                            state.result.errors["\(error.code)", default: 0] += 1
                        }
                        state.completed += 1
                        guard state.completed == count, let continuation = state.continuation else { return nil }
                        state.continuation = nil
                        return (state.result, continuation)
                    }
                    if let (total, continuation) = finished {
                        continuation.resume(returning: total)
                    } else {
                        sendOwed(1)
                    }
                }
            }
        }

        /// 64 random lowercase hex digits (one random draw per 8 bytes, no formatting per byte).
        static func randomDeviceToken() -> String {
            let digits = Array("0123456789abcdef".utf8)
            var text: [UInt8] = []
            text.reserveCapacity(64)
            for _ in 0..<4 {
                var word = UInt64.random(in: .min ... .max)
                for _ in 0..<16 {
                    text.append(digits[Int(word & 0xF)])
                    word >>= 4
                }
            }
            return String(decoding: text, as: UTF8.self)
        }

        struct BenchResult: Sendable {
            var accepted = 0
            var latencies: [Double] = []
            var errors: [String: Int] = [:]
        }

        static func milliseconds(_ duration: Duration) -> Double {
            let (seconds, attoseconds) = duration.components
            return Double(seconds) * 1000 + Double(attoseconds) / 1e15
        }

        static func report(_ result: BenchResult, count: Int, seconds: Double, json: Bool, connections: Int, concurrency: Int) -> String {
            let sorted = result.latencies.sorted()
            func percentile(_ p: Double) -> Double {
                guard !sorted.isEmpty else { return 0 }
                return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
            }
            let rate = Double(count) / max(seconds, 1e-9)
            let memory = peakResidentMegabytes()
            if json {
                let object: [String: Any] = [
                    "count": count, "accepted": result.accepted, "seconds": seconds, "notifications_per_second": rate.rounded(),
                    "p50_ms": percentile(0.5), "p99_ms": percentile(0.99), "max_ms": sorted.last ?? 0, "errors": result.errors,
                    "connections": connections, "concurrency": concurrency, "peak_rss_mb": memory,
                ]
                let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
                return String(decoding: data, as: UTF8.self)
            }
            var lines = [
                String(format: "%.0f notifications/s", rate),
                String(format: "p50 %.2f ms, p99 %.2f ms, max %.2f ms", percentile(0.5), percentile(0.99), sorted.last ?? 0),
                "sent \(count) in \(String(format: "%.2f", seconds)) s over \(connections) connection(s), \(concurrency) in flight; accepted \(result.accepted)",
                "peak RSS \(memory) MB",
            ]
            if result.errors.isEmpty {
                lines.append("errors: none")
            } else {
                lines.append("errors:")
                for (reason, number) in result.errors.sorted(by: { $0.value > $1.value }) { lines.append("  \(reason): \(number)") }
            }
            return lines.joined(separator: "\n")
        }

        /// VmHWM from /proc/self/status, in MB.
        static func peakResidentMegabytes() -> Int {
            guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
            else { return 0 }
            return kilobytes / 1024
        }
    }
}
