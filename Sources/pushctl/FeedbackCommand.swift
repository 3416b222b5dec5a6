import AMQP
import ArgumentParser
import Foundation
import Logging
import PushCore
import PushFeedback
import PushServiceKit
import Redis
import TokenRegistry

extension PushctlCommand {
    /// `pushctl feedback …`: invalid-token feedback by hand.
    struct Feedback: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invalid-token feedback: import the legacy APNs feedback service's dumps.",
            subcommands: [Import.self]
        )
    }
}

extension PushctlCommand.Feedback {
    /// `pushctl feedback import FILE|- --app BUNDLE_ID`.
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the tokens a legacy APNs feedback dump lists, under the invalid-token rule.",
            discussion: """
                Reads the binary stream Apple's retired feedback service sent (repeated records: 4-byte big-endian time in seconds since 1970, 2-byte big-endian token length, the token bytes) from FILE, or from standard input with -. The whole stream is parsed first: a truncated or corrupt stream is refused with the byte offset of the bad record, and nothing is removed. Then each token is removed from the registry unless it was registered again after its time, and each removal is announced as token.removed (reason Unregistered) on push.events. Safe to run twice: a token removed within the last hour is announced again, so a run cut short loses no event.
                """
        )

        @Argument(help: "The feedback dump, or - for standard input.")
        var file: String

        @Option(help: "The app's bundle id (the dump names none).")
        var app: String

        @Option(help: "Redis URL (default: PUSH_REDIS_URL, else redis://127.0.0.1:6379/0).")
        var redisURL: String?

        @Option(help: "RabbitMQ URL (default: PUSH_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/%2f).")
        var amqpURL: String?

        @Option(help: "Tokens per Redis pipeline and batch of events.")
        var batchSize = 500

        @Flag(help: "Parse and count only; change nothing.")
        var dryRun = false

        func run() async throws {
            let bytes = try readInput()
            let parsed: (records: Int, reports: [InvalidTokenReport])
            do {
                parsed = try LegacyFeedbackImport.reports(from: bytes, app: app)
            } catch {
                throw ValidationError("\(file == "-" ? "standard input" : file): \(error.message); nothing was imported")
            }
            print("\(parsed.records) records, \(parsed.reports.count) distinct tokens for \(app)")
            if dryRun || parsed.reports.isEmpty { return }

            let environment = ProcessInfo.processInfo.environment
            let logger = Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() })
            let redis = try await RedisClient.connect(
                configuration: try RedisConfiguration(url: redisURL ?? environment["PUSH_REDIS_URL"] ?? "redis://127.0.0.1:6379/0"),
                logger: logger
            )
            let amqp = AMQPConnection(
                configuration: try AMQPConfiguration(
                    url: amqpURL ?? environment["PUSH_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f",
                    connectionName: "pushctl"
                ),
                topology: .push,
                logger: logger
            )
            let summary: LegacyFeedbackImport.Summary
            do {
                try await amqp.waitUntilConnected(timeout: .seconds(10))
                let remover = TokenRemover(
                    registry: TokenRegistry(redis: redis),
                    amqp: amqp,
                    noteLifetime: FeedbackConfiguration().removalNoteLifetime,
                    metrics: FeedbackMetrics()
                )
                summary = try await LegacyFeedbackImport.apply(parsed.reports, records: parsed.records, remover: remover, batchSize: batchSize)
            } catch {
                await amqp.close()
                await redis.close()
                throw error
            }
            await amqp.close()
            await redis.close()
            let tally = summary.tally
            print("removed \(tally.removed), kept \(tally.kept) (registered again later), not registered \(tally.notFound), refused \(tally.refused)")
            for refusal in tally.refusals { print("  refused: \(refusal)") }
            if tally.refused > 0 { throw ExitCode(2) }
        }

        private func readInput() throws -> [UInt8] {
            if file == "-" {
                return Array(FileHandle.standardInput.readDataToEndOfFile())
            }
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("\(file): cannot be read")
            }
            return Array(data)
        }
    }
}
