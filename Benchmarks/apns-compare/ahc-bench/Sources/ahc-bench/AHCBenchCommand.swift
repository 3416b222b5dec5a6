import ArgumentParser
import Crypto
import Foundation
import Synchronization

/// `ahc-bench`: sends N notifications through ``APNsSender`` (what APNSwift does, on AsyncHTTPClient)
/// with C in flight, and prints the figures `pushctl bench` prints: notifications/s, p50/p99 latency,
/// errors by reason, peak RSS and the process's CPU time.
@main
struct AHCBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ahc-bench",
        abstract: "APNSwift-style APNs sender on AsyncHTTPClient: notifications/s and p50/p99 against an APNs-compatible server.",
        discussion: """
            --connections K makes K senders (K HTTPClients, as K APNSwift clients would be); the C workers
            take turns between them. A throw-away P-256 key signs the provider token (apns-sandbox without
            --public-key accepts it). Only point it at servers you own: it sends as fast as it can.

            Example:
              ahc-bench --endpoint https://127.0.0.1:2197 --ca-file .local/apns-sandbox/ca.pem --count 200000 --concurrency 1000
            """
    )

    @Option(help: "APNs endpoint URL, e.g. https://127.0.0.1:2197.")
    var endpoint: String

    @Option(help: "CA certificate (PEM) to trust instead of the system's, e.g. apns-sandbox's --ca-out.")
    var caFile: String?

    @Option(help: "Notifications to send.")
    var count: Int = 100_000

    @Option(help: "Notifications in flight at once.")
    var concurrency: Int = 1000

    @Option(help: "Senders, each its own HTTPClient and HTTP/2 connection.")
    var connections: Int = 1

    @Option(help: "apns-topic (a bundle id).")
    var topic: String = "com.example.bench"

    @Option(help: "Distinct random device tokens to cycle through.")
    var tokens: Int = 1000

    @Flag(help: "Read each 200's empty body to its end (APNSwift does not).")
    var drainBody = false

    @Flag(help: "Log AsyncHTTPClient's connection activity (debug level) to stderr.")
    var traceConnections = false

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard endpoint.hasPrefix("https://") else { throw ValidationError("--endpoint must be an https:// URL (got '\(endpoint)')") }
        guard (1...100_000_000).contains(count) else { throw ValidationError("--count must be 1–100000000") }
        guard (1...100_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1–100000") }
        guard (1...64).contains(connections) else { throw ValidationError("--connections must be 1–64") }
        guard (1...1_000_000).contains(tokens) else { throw ValidationError("--tokens must be 1–1000000") }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw ValidationError("--ca-file '\(caFile)' cannot be read")
        }
    }

    func run() async throws {
        // One throw-away key per sender (each APNSwift client holds its own key).
        let senders = (0..<connections).map { _ in
            APNsSender(
                endpoint: endpoint, caFile: caFile,
                tokens: ProviderTokenCache(privateKey: P256.Signing.PrivateKey(), keyID: "BENCHKEY01", teamID: "BENCHTEAM1"),
                traceConnections: traceConnections
            )
        }
        let deviceTokens = (0..<tokens).map { _ in (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }
        let payload = AlertPayload.benchmark
        let (topic, count, drainBody) = (self.topic, self.count, self.drainBody)

        // Warm-up: open each connection and mint each token outside the measurement.
        for sender in senders {
            do {
                let answer = try await sender.send(payload, deviceToken: deviceTokens[0], topic: topic)
                guard answer.status == 200 else { throw ValidationError("warm-up answered \(answer.status) \(answer.reason ?? "")") }
            } catch {
                for sender in senders { try? await sender.shutdown() }
                throw error
            }
        }

        let next = TicketCounter()
        let started = ContinuousClock.now
        let results = await withTaskGroup(of: WorkerResult.self) { group in
            for worker in 0..<min(concurrency, count) {
                let sender = senders[worker % senders.count]
                group.addTask {
                    var result = WorkerResult()
                    while true {
                        let index = next.take()
                        guard index < count else { break }
                        let sentAt = ContinuousClock.now
                        do {
                            let answer = try await sender.send(
                                payload, deviceToken: deviceTokens[index % deviceTokens.count], topic: topic, drainBody: drainBody
                            )
                            result.latencies.append(Self.milliseconds(ContinuousClock.now - sentAt))
                            if answer.status == 200 {
                                result.accepted += 1
                            } else {
                                result.errors["\(answer.status) \(answer.reason ?? "")", default: 0] += 1
                            }
                        } catch {
                            result.errors[Self.errorKey(error), default: 0] += 1
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
        let seconds = Self.milliseconds(ContinuousClock.now - started) / 1000
        for sender in senders { try? await sender.shutdown() }
        print(Self.report(results, count: count, seconds: seconds, json: json, connections: connections, concurrency: concurrency))
        if results.accepted == 0 { throw ExitCode(1) }
    }

    /// An error's kind without per-request details (stream ids, source locations), so errors group.
    static func errorKey(_ error: any Error) -> String {
        let text = "\(error)"
        guard let parenthesis = text.firstIndex(of: "(") else { return text }
        if let code = text.range(of: "errorCode: ") {
            return "\(text[..<parenthesis]) \(text[code.upperBound...].prefix(while: { $0 != "," && $0 != ")" }))"
        }
        return String(text[..<parenthesis])
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

    /// The same figures and JSON keys as `pushctl bench --json`.
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
