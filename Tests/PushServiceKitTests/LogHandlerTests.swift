import Foundation
import Logging
import Synchronization
import Testing

@testable import PushServiceKit

@Suite("Log lines")
struct LogHandlerTests {
    /// 2026-01-01T00:00:00.123Z
    static let fixedDate = Date(timeIntervalSince1970: 1_767_225_600.123)

    static func textLogger(_ lines: CollectedLines, level: Logger.Level = .info) -> Logger {
        Logger(label: "push-send") { label in
            PushLogHandler(format: .text, label: label, logLevel: level, output: LogOutput { lines.append($0) }, clock: { fixedDate })
        }
    }

    static func jsonLogger(_ lines: CollectedLines, level: Logger.Level = .info) -> Logger {
        Logger(label: "push-send") { label in
            PushLogHandler(format: .json, label: label, logLevel: level, output: LogOutput { lines.append($0) }, clock: { fixedDate })
        }
    }

    static func parse(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    // MARK: Text

    @Test func textLineHasTimestampLevelLabelMessageAndSortedMetadata() {
        let lines = CollectedLines()
        var logger = Self.textLogger(lines)
        logger[metadataKey: "push.service"] = "send"
        logger.info("batch sent", metadata: ["apns.status": "200", "push.request_id": "order-4711"])
        #expect(lines.all == ["2026-01-01T00:00:00.123Z info push-send: batch sent apns.status=200 push.request_id=order-4711 push.service=send"])
    }

    @Test func textValuesThatNeedQuotesAreQuoted() {
        let lines = CollectedLines()
        let logger = Self.textLogger(lines)
        logger.warning(
            "two\nlines",
            metadata: [
                "a": "with space", "b": "", "c": "say \"hi\"", "d": "k=v", "e": .array(["x", "y"]), "f": .stringConvertible(42),
                "g": .dictionary(["z": "1", "y": .array([])]),
            ]
        )
        #expect(
            lines.all == [
                #"2026-01-01T00:00:00.123Z warning push-send: two\nlines a="with space" b="" c="say \"hi\"" d="k=v" e="[x, y]" f=42 g="[y: [], z: 1]""#
            ]
        )
    }

    @Test func eventMetadataWinsOverHandlerAndProviderMetadata() {
        let lines = CollectedLines()
        let provider = Logger.MetadataProvider { ["from": "provider", "provided": "yes"] }
        var logger = Logger(label: "l") { label in
            PushLogHandler(format: .text, label: label, output: LogOutput { lines.append($0) }, metadataProvider: provider, clock: { Self.fixedDate })
        }
        logger[metadataKey: "from"] = "handler"
        logger[metadataKey: "handler"] = "yes"
        logger.info("m")
        logger.info("m", metadata: ["from": "event"])
        #expect(
            lines.all == [
                "2026-01-01T00:00:00.123Z info l: m from=provider handler=yes provided=yes",
                "2026-01-01T00:00:00.123Z info l: m from=event handler=yes provided=yes",
            ]
        )
    }

    @Test func levelsBelowTheHandlersAreNotWritten() {
        let lines = CollectedLines()
        let logger = Self.textLogger(lines, level: .notice)
        logger.info("quiet")
        logger.debug("quiet")
        logger.notice("loud")
        logger.critical("louder")
        #expect(lines.all.map { $0.split(separator: " ")[1] } == ["notice", "critical"])
    }

    @Test func errorsBecomeMetadata() {
        struct Broken: Error, CustomStringConvertible {
            var description: String { "socket closed" }
        }
        let lines = CollectedLines()
        let handler = PushLogHandler(format: .text, label: "l", output: LogOutput { lines.append($0) }, clock: { Self.fixedDate })
        handler.log(
            event: LogEvent(
                level: .error, message: "failed", error: Broken(), metadata: nil, source: nil, file: #fileID, function: #function, line: #line))
        #expect(lines.all.first?.hasPrefix(#"2026-01-01T00:00:00.123Z error l: failed error.message="socket closed" error.type="#) == true)
    }

    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (1_767_225_600.9996, "2026-01-01T00:00:00.999Z"),
        (951_782_400.5, "2000-02-29T00:00:00.500Z"),
        (4_102_444_799.001, "2099-12-31T23:59:59.001Z"),
        (-0.5, "1969-12-31T23:59:59.500Z"),
    ])
    func timestampsAreUTCWithMilliseconds(seconds: Double, text: String) {
        #expect(LogRecord.iso8601(Date(timeIntervalSince1970: seconds)) == text)
    }

    // MARK: JSON

    @Test func jsonLineHasFixedKeysFirstThenFlattenedMetadata() throws {
        let lines = CollectedLines()
        var logger = Self.jsonLogger(lines)
        logger[metadataKey: "push.service"] = "send"
        logger.info("batch sent", metadata: ["apns.status": "200"])
        #expect(
            lines.all == [
                #"{"ts":"2026-01-01T00:00:00.123Z","level":"info","label":"push-send","message":"batch sent","apns.status":"200","push.service":"send"}"#
            ]
        )
    }

    @Test func jsonEscapesAndNestsAndRenamesCollidingKeys() throws {
        let lines = CollectedLines()
        let logger = Self.jsonLogger(lines)
        logger.error(
            "quote \" backslash \\ newline \n tab \t bell \u{07} ünïcode",
            metadata: [
                "message": "collides",
                "level": "collides too",
                "list": .array(["a", .stringConvertible(1)]),
                "nested": .dictionary(["k": "v", "deeper": .dictionary(["x": .array([])])]),
            ]
        )
        let line = try #require(lines.all.first)
        #expect(!line.contains("\n"))
        let object = try Self.parse(line)
        #expect(object["ts"] as? String == "2026-01-01T00:00:00.123Z")
        #expect(object["level"] as? String == "error")
        #expect(object["label"] as? String == "push-send")
        #expect(object["message"] as? String == "quote \" backslash \\ newline \n tab \t bell \u{07} ünïcode")
        #expect(object["metadata.message"] as? String == "collides")
        #expect(object["metadata.level"] as? String == "collides too")
        #expect(object["list"] as? [String] == ["a", "1"])
        let nested = try #require(object["nested"] as? [String: Any])
        #expect(nested["k"] as? String == "v")
        #expect((nested["deeper"] as? [String: Any])?["x"] as? [Any] != nil)
        #expect(
            line.hasPrefix(
                #"{"ts":"2026-01-01T00:00:00.123Z","level":"error","label":"push-send","message":"quote \" backslash \\ newline \n tab \t bell \u0007 ünïcode","#
            ))
    }

    @Test func makeHandlerPicksTheFormat() {
        let lines = CollectedLines()
        let output = LogOutput { lines.append($0) }
        let text = Logger(label: "t") { PushLogging.makeHandler(label: $0, format: .text, level: .info, output: output) }
        let json = Logger(label: "j") { PushLogging.makeHandler(label: $0, format: .json, level: .info, output: output) }
        text.info("hello")
        json.info("hello")
        let all = lines.all
        #expect(all.count == 2)
        #expect(all[0].hasSuffix(" info t: hello"))
        #expect(all[1].hasPrefix(#"{"ts":""#))
        #expect(all[1].hasSuffix(#""level":"info","label":"j","message":"hello"}"#))
    }

    @Test func bootstrapInstallsTheFormatOnce() {
        let lines = CollectedLines()
        let marker = "bootstrap-\(UUID().uuidString)"
        guard PushLogging.bootstrap(format: .json, level: .notice, output: LogOutput { lines.append($0) }) else {
            Issue.record("logging was bootstrapped before this test")
            return
        }
        let logger = Logger(label: "bootstrapped")
        logger.info("below the level \(marker)")
        logger.notice("\(marker)")
        #expect(lines.all.filter { $0.contains(marker) }.count == 1)
        #expect(lines.all.contains { $0.contains(#""level":"notice","label":"bootstrapped","message":"\#(marker)""#) })
        #expect(PushLogging.bootstrap(format: .text, level: .trace) == false)
    }

    // MARK: Whole lines on a file descriptor

    @Test func concurrentLinesAreNeverInterleaved() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("out.log").path
            let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let writer = StandardOutputWriter(fileDescriptor: descriptor)
            let writers = 8
            let linesPerWriter = 200
            // Longer than PIPE_BUF (4096), so a line could be split if writes were not serialised.
            let payload = String(repeating: "x", count: 10_000)
            await withTaskGroup(of: Void.self) { group in
                for writerIndex in 0..<writers {
                    group.addTask {
                        for lineIndex in 0..<linesPerWriter {
                            writer.write("w\(writerIndex) l\(lineIndex) \(payload) end")
                        }
                    }
                }
            }
            let contents = try String(contentsOfFile: path, encoding: .utf8)
            let lines = contents.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count == writers * linesPerWriter)
            #expect(lines.allSatisfy { $0.hasPrefix("w") && $0.hasSuffix(" \(payload) end") })
            #expect(contents.hasSuffix("end\n"))
        }
    }
}
