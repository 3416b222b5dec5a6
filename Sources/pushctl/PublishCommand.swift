import AMQP
import ArgumentParser
import Foundation
import PushCore
import PushServiceKit
import Redis

extension PushctlCommand {
    /// `pushctl publish`: puts a push request (or a registration) on the broker exactly as other
    /// services do — persistent JSON, publisher confirm — for tests, demos and manual replays.
    struct Publish: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish a push request (CONTRACT.md, Push request v1) or a registration message from a file or stdin.",
            discussion: """
                The body is checked to be a JSON object; push-render (or push-ingest) does the full validation and dead-letters what it refuses.
                Example:  echo '{"id":"demo-1","app":"com.example.game","to":{"users":["alice"]},"payload":{"aps":{"alert":"Hi"}}}' | pushctl publish -
                """
        )

        @OptionGroup var connection: ConnectionOptions

        @Argument(help: "The message file, or - for stdin.")
        var file: String

        @Flag(help: "Publish to push.registrations (routing key registration) instead of push.requests.")
        var registration = false

        func run() async throws {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let read = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read '\(file)'") }
                data = read
            }
            guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
                throw ValidationError("'\(file)' is not a JSON object")
            }
            let queues = connection.queues
            let routingKey = registration ? queues.registrations.routingKey : queues.requests.routingKey
            let amqp = try await connection.amqp()
            do {
                try await amqp.publish(
                    AMQPOutboundMessage(
                        exchange: queues.exchange, routingKey: routingKey, body: Array(data),
                        properties: AMQPProperties(
                            contentType: "application/json", persistent: true, timestamp: UInt64(Date().timeIntervalSince1970))
                    )
                )
            } catch {
                await amqp.close()
                throw error
            }
            await amqp.close()
            if !registration, let id = object["id"] as? String, let app = object["app"] as? String {
                await Self.noteQueued(app: app, id: id, connection: connection)
            }
            let label = (object["id"] as? String).map { " '\($0)'" } ?? ""
            print("published\(label) to exchange \(queues.exchange), routing key \(routingKey) (confirmed)")
        }

        /// Marks the request `queued` in its delivery report (`pushctl request`); a Redis that cannot be
        /// reached only costs the `queued` state, so it is a warning.
        static func noteQueued(app: String, id: String, connection: ConnectionOptions) async {
            guard !id.isEmpty, id.count <= PushRequest.maximumIDLength, !app.isEmpty, app.count <= 255 else { return }
            do {
                let redis = try await connection.redis()
                var failure: RedisError?
                do {
                    try await RequestReports(redis: redis).recordQueued(app: app, requestID: id, now: Int64(Date().timeIntervalSince1970 * 1000))
                } catch {
                    failure = error
                }
                await redis.close()
                if let failure { throw failure }
            } catch {
                FileHandle.standardError.write(Data("pushctl publish: warning: could not mark the request queued in its report (\(error))\n".utf8))
            }
        }
    }
}
