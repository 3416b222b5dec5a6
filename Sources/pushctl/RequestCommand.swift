import ArgumentParser
import Foundation
import PushCore
import PushServiceKit

extension PushctlCommand {
    /// `pushctl request <id>`: what became of one push request (``PushCore/RequestReport``).
    struct Request: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Print a push request's delivery report: state, targeted, skipped, batches, sent, delivered, failed by reason, retried, deferred, removed, times.",
            discussion: """
                The report lives in Redis for PUSH_REPORT_TTL_S (default 7 days) after its last change. Without --app every \
                app of the apps file is searched. Exits 1 when no app has a report of that id.
                """
        )

        @OptionGroup var connection: ConnectionOptions

        @Argument(help: "The request's id.")
        var id: String

        @Option(help: "The app's bundle id (default: look in every app of the apps file).")
        var app: String?

        @Option(help: "The apps file, to find the app (default: PUSH_APPS_FILE, else config/apps.json).")
        var appsFile: String?

        @Flag(help: "Print the report as one JSON object.")
        var json = false

        @Option(help: "Print the report again every N seconds until it is done or dead (at most 1 hour).")
        var watch: Int?

        func run() async throws {
            if let watch, !(1...60).contains(watch) { throw ValidationError("--watch must be 1–60 seconds") }
            let apps: [String]
            if let app {
                apps = [app]
            } else {
                let path = appsFile ?? ProcessInfo.processInfo.environment["PUSH_APPS_FILE"] ?? "config/apps.json"
                do {
                    apps = try AppsFile.load(path: path).bundleIDs.sorted()
                } catch {
                    throw ValidationError("no --app, and the apps file cannot be read: \(error)")
                }
            }
            let redis = try await connection.redis()
            let reports = RequestReports(redis: redis)
            let deadline = ContinuousClock.now + .seconds(3600)
            while true {
                var found: RequestReport?
                for app in apps {
                    if let report = try await reports.report(app: app, requestID: id) {
                        found = report
                        break
                    }
                }
                guard let report = found else {
                    FileHandle.standardError.write(
                        Data(
                            "pushctl request: no report of '\(id)' (\(apps.joined(separator: ", "))); unknown, not yet taken by push-render, or expired\n"
                                .utf8))
                    throw ExitCode(1)
                }
                print(json ? report.json : report.text + "\n")
                guard let watch, report.state != .done, report.state != .dead, ContinuousClock.now < deadline else { break }
                try await Task.sleep(for: .seconds(watch))
            }
        }
    }
}
