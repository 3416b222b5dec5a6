import Foundation
public import Redis

/// What push-send found of an app's APNs credentials, written where the console reads it: the
/// console needs no signing key or certificate of its own to show an app's credential kind, expiry
/// and problems. `{prefix}:{<app>}:credentials` is a hash (`kind`, `environment`, `expires_at` in
/// seconds, `problems` and `warnings` one a line, `checked_at` in ms), written at push-send's start
/// and every hour after, and expiring after ``lifetime`` so a summary nobody refreshes goes away.
public struct CredentialSummary: Sendable, Equatable {
    public var app: String
    /// `token` or `certificate`.
    public var kind: String
    public var environment: String
    /// A certificate's expiry (seconds since 1970).
    public var expiresAt: Int64?
    public var problems: [String]
    public var warnings: [String]
    /// When push-send read the files (ms since 1970).
    public var checkedAt: Int64

    public init(
        app: String, kind: String, environment: String, expiresAt: Int64?, problems: [String], warnings: [String], checkedAt: Int64
    ) {
        self.app = app
        self.kind = kind
        self.environment = environment
        self.expiresAt = expiresAt
        self.problems = problems
        self.warnings = warnings
        self.checkedAt = checkedAt
    }
}

public struct CredentialSummaries: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String
    /// Three of push-send's hourly rounds.
    public static let lifetime: Duration = .seconds(3 * 3600)

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push") {
        self.redis = redis
        self.keyPrefix = keyPrefix
    }

    public func key(app: String) -> String { "\(keyPrefix):{\(app)}:credentials" }

    public func write(_ summaries: [CredentialSummary]) async throws(RedisError) {
        guard !summaries.isEmpty else { return }
        var commands: [RedisCommand] = []
        for summary in summaries {
            let key = key(app: summary.app)
            commands.append(RedisCommand(["DEL", key]))
            var set: RedisCommand = [
                "HSET", key, "kind", summary.kind, "environment", summary.environment, "problems", summary.problems.joined(separator: "\n"),
                "warnings", summary.warnings.joined(separator: "\n"), "checked_at",
            ]
            set.append(summary.checkedAt)
            if let expiresAt = summary.expiresAt {
                set.append("expires_at")
                set.append(expiresAt)
            }
            commands.append(set)
            var expire: RedisCommand = ["EXPIRE", key]
            expire.append(Self.lifetime.components.seconds)
            commands.append(expire)
        }
        _ = try await redis.pipeline(commands)
    }

    /// The summaries of `apps` that push-send has written and not let expire.
    public func read(apps: [String]) async throws(RedisError) -> [String: CredentialSummary] {
        guard !apps.isEmpty else { return [:] }
        let replies = try await redis.pipeline(apps.map { RedisCommand(["HGETALL", key(app: $0)]) })
        var found: [String: CredentialSummary] = [:]
        for (app, reply) in zip(apps, replies) {
            guard let elements = reply.array, elements.count >= 2 else { continue }
            var fields: [String: String] = [:]
            var index = 0
            while index + 1 < elements.count {
                if let name = elements[index].string, let value = elements[index + 1].string { fields[name] = value }
                index += 2
            }
            guard let kind = fields["kind"], let environment = fields["environment"] else { continue }
            func lines(_ name: String) -> [String] { (fields[name] ?? "").split(separator: "\n").map(String.init) }
            found[app] = CredentialSummary(
                app: app, kind: kind, environment: environment, expiresAt: fields["expires_at"].flatMap { Int64($0) }, problems: lines("problems"),
                warnings: lines("warnings"), checkedAt: fields["checked_at"].flatMap { Int64($0) } ?? 0)
        }
        return found
    }
}
