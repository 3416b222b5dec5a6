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
            let deviceTokens = (0..<tokens).map { _ in (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }
            let payload = Array(#"{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushctl bench"},"sound":"default"}}"#.utf8)
            let topic = self.topic
            let count = self.count

            // Warm-up: open the connections and mint the token outside the measurement.
            _ = try? await client.send(APNsNotification(deviceToken: deviceTokens[0], topic: topic, payload: payload))

            let next = TicketCounter()
            let started = ContinuousClock.now
            let results = await withTaskGroup(of: WorkerResult.self) { group in
                for _ in 0..<min(concurrency, count) {
                    group.addTask {
                        var result = WorkerResult()
                        while true {
                            let index = next.take()
                            guard index < count else { break }
                            let notification = APNsNotification(
                                deviceToken: deviceTokens[index % deviceTokens.count], topic: topic, payload: payload
                            )
                            let sentAt = ContinuousClock.now
                            do throws(APNsClientError) {
                                let response = try await client.send(notification)
                                result.latencies.append(Self.milliseconds(ContinuousClock.now - sentAt))
                                if response.status == 200 {
                                    result.accepted += 1
                                } else {
                                    result.errors["\(response.status) \(response.reason?.rawValue ?? "")", default: 0] += 1
                                }
                            } catch {
                                result.errors["\(error.code)", default: 0] += 1
                            }
                        }
                        return result
                    }
                }
                var total = WorkerResult()
                for await result in group {
                    total.accepted += result.accepted
                    total.latencies += result.latencies
                    total.errors.merge(result.errors, uniquingKeysWith: +)
                }
                return total
            }
            let elapsed = Self.milliseconds(ContinuousClock.now - started) / 1000
            await client.shutdown()
            print(Self.report(results, count: count, seconds: elapsed, json: json, connections: connections, concurrency: concurrency))
            if results.accepted == 0 { throw ExitCode(1) }
        }

        /// Hands out 0, 1, 2, … to the workers.
        final class TicketCounter: Sendable {
            private let value = Atomic<Int>(0)
            func take() -> Int { value.add(1, ordering: .relaxed).oldValue }
        }

        struct WorkerResult: Sendable {
            var accepted = 0
            var latencies: [Double] = []
            var errors: [String: Int] = [:]
        }

        static func milliseconds(_ duration: Duration) -> Double {
            let (seconds, attoseconds) = duration.components
            return Double(seconds) * 1000 + Double(attoseconds) / 1e15
        }

        static func report(_ result: WorkerResult, count: Int, seconds: Double, json: Bool, connections: Int, concurrency: Int) -> String {
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
