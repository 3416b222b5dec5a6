public import Redis

/// push-send's credential pauses, written where operators can see them (the console's status page):
/// `{prefix}:{<app>}:paused` holds the reason and expires when the pause ends. push-send itself goes by
/// its own memory (``PushSend/AppPauses``); this is only the note.
public struct AppPauseNotes: Sendable {
    private let redis: any RedisCommandExecutor
    public let keyPrefix: String

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push") {
        self.redis = redis
        self.keyPrefix = keyPrefix
    }

    public func key(app: String) -> String { "\(keyPrefix):{\(app)}:paused" }

    /// Notes that `app` is paused for `duration` because of `reason`.
    public func write(app: String, reason: String, duration: Duration) async throws(RedisError) {
        let (seconds, attoseconds) = duration.components
        let milliseconds = Swift.max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        var command: RedisCommand = ["SET", key(app: app), String(reason.prefix(200)), "PX"]
        command.append(milliseconds)
        _ = try await redis.execute(command)
    }

    /// For each app that is paused now: the reason and the time left (ms).
    public func read(apps: [String]) async throws(RedisError) -> [String: (reason: String, remaining: Int64)] {
        guard !apps.isEmpty else { return [:] }
        var commands: [RedisCommand] = []
        for app in apps {
            commands.append(RedisCommand(["GET", key(app: app)]))
            commands.append(RedisCommand(["PTTL", key(app: app)]))
        }
        let replies = try await redis.pipeline(commands)
        var paused: [String: (reason: String, remaining: Int64)] = [:]
        for (index, app) in apps.enumerated() where 2 * index + 1 < replies.count {
            if let reason = replies[2 * index].string, let remaining = replies[2 * index + 1].integer, remaining > 0 {
                paused[app] = (reason, remaining)
            }
        }
        return paused
    }
}
