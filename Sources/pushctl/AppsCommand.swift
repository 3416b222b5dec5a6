import ArgumentParser
import Foundation
import PushCore
import PushSend
import PushServiceKit

extension PushctlCommand {
    /// `pushctl apps check`: the apps file and every credential in it, as push-send would load them.
    struct Apps: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the apps file and the APNs credentials it names.",
            subcommands: [Check.self]
        )

        struct Check: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "Validate the apps file, load every key and certificate, and print per app its auth kind, key id or subject, environment, expiry and problems.",
                discussion: """
                    Exits 0 when every app's credentials load and none expired, 1 when one has a problem (a wrong \
                    password, a key that does not belong to its certificate, an expired certificate, a certificate \
                    issued for another bundle id, an unreadable or malformed file), 2 when the apps file itself is \
                    invalid (the message names the app and the field). Warnings (a certificate expiring within 30 \
                    days, a key file others can read, a key file named for another key id) are printed and do not \
                    fail the check unless --strict.
                    """)

            @Option(help: "The apps file (default: PUSH_APPS_FILE, else config/apps.json).")
            var appsFile: String?

            @Flag(
                help:
                    "Print one JSON object: {apps: [{app, environment, auth, key_id, team_id, subject, expires_at, days_left, problems, warnings}]}.")
            var json = false

            @Flag(help: "Fail (exit 1) on warnings too.")
            var strict = false

            func run() async throws {
                let path = appsFile ?? ProcessInfo.processInfo.environment["PUSH_APPS_FILE"] ?? "config/apps.json"
                let file: AppsFile
                do {
                    file = try AppsFile.load(path: path, readIngestSecrets: true)
                } catch {
                    FileHandle.standardError.write(Data("pushctl apps check: \(error)\n".utf8))
                    throw ExitCode(2)
                }
                let now = Int64(Date().timeIntervalSince1970)
                let reports = file.bundleIDs.sorted().compactMap { file.app(bundleID: $0) }.map { CredentialReport.inspect($0, now: now) }
                if json {
                    let objects = reports.map { report -> [String: Any] in
                        var object: [String: Any] = [
                            "app": report.app, "environment": report.environment.rawValue, "auth": report.kind.rawValue,
                            "problems": report.problems, "warnings": report.warnings,
                        ]
                        if let keyID = report.keyID { object["key_id"] = keyID }
                        if let teamID = report.teamID { object["team_id"] = teamID }
                        if let subject = report.subject { object["subject"] = subject }
                        if let expiresAt = report.expiresAt {
                            object["expires_at"] = Self.date(expiresAt)
                            object["days_left"] = Int(report.daysLeft(now: now)!.rounded(.down))
                        }
                        return object
                    }
                    let data = try JSONSerialization.data(withJSONObject: ["apps": objects], options: [.sortedKeys])
                    print(String(decoding: data, as: UTF8.self))
                } else {
                    print("\(path): \(reports.count) app\(reports.count == 1 ? "" : "s")")
                    for report in reports { print(Self.describe(report, now: now)) }
                }
                let problems = reports.reduce(0) { $0 + $1.problems.count }
                let warnings = reports.reduce(0) { $0 + $1.warnings.count }
                if !json { print("\(problems) problem\(problems == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")") }
                if problems > 0 || (strict && warnings > 0) { throw ExitCode(1) }
            }

            static func describe(_ report: CredentialReport, now: Int64) -> String {
                var lines = ["\(report.app) (\(report.environment.rawValue))"]
                switch report.kind {
                case .token:
                    lines.append("  auth: token, key id \(report.keyID ?? "?"), team id \(report.teamID ?? "?"); keys do not expire")
                case .certificate:
                    lines.append("  auth: certificate\(report.subject.map { ", subject \($0)" } ?? "")")
                    if let expiresAt = report.expiresAt, let days = report.daysLeft(now: now) {
                        lines.append("  expires: \(date(expiresAt)) (\(days >= 0 ? "in \(Int(days.rounded(.down))) days" : "expired"))")
                    }
                }
                lines += report.problems.map { "  PROBLEM: \($0)" }
                lines += report.warnings.map { "  warning: \($0)" }
                if report.problems.isEmpty && report.warnings.isEmpty { lines.append("  ok") }
                return lines.joined(separator: "\n")
            }

            static func date(_ seconds: Int64) -> String {
                let formatter = ISO8601DateFormatter()
                return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            }
        }
    }
}
