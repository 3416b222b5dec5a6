public import AMQP
import Foundation
public import Logging
public import PushCore
import PushSend
public import PushServiceKit
public import Redis
public import TokenRegistry

/// Everything the console does, apart from HTTP: the same operations behind the pages and the JSON
/// API (and the ones `pushctl` has). Requests are checked by push-render's own code before they are
/// published; reports, dead letters, queues and tokens are read where the services keep them.
public struct ConsoleBackend: Sendable {
    public let amqp: AMQPConnection
    public let redis: any RedisCommandExecutor
    public let apps: AppsFile
    public let catalogs: LocalizationCatalogs
    public let queues: PushQueues
    public let registry: TokenRegistry
    public let reports: RequestReports
    public let pauseNotes: AppPauseNotes
    public let credentialSummaries: CredentialSummaries
    public let logger: Logger
    public let now: @Sendable () -> Int64

    public init(
        amqp: AMQPConnection, redis: any RedisCommandExecutor, apps: AppsFile, catalogs: LocalizationCatalogs, queues: PushQueues = .standard,
        keyPrefix: String = "push", registryShards: Int = RegistryLayout.defaultShards, reportTTL: Duration = RequestReports.defaultTTL,
        logger: Logger, now: @escaping @Sendable () -> Int64 = ServiceDependencies.wallClockMilliseconds
    ) {
        self.amqp = amqp
        self.redis = redis
        self.apps = apps
        self.catalogs = catalogs
        self.queues = queues
        self.registry = TokenRegistry(
            redis: redis, keyPrefix: keyPrefix, layouts: RegistryLayouts(redis: redis, keyPrefix: keyPrefix, defaultShards: registryShards))
        self.reports = RequestReports(redis: redis, keyPrefix: keyPrefix, ttl: reportTTL)
        self.pauseNotes = AppPauseNotes(redis: redis, keyPrefix: keyPrefix)
        self.credentialSummaries = CredentialSummaries(redis: redis, keyPrefix: keyPrefix)
        self.logger = logger
        self.now = now
    }

    public var appIDs: [String] { apps.bundleIDs.sorted() }

    // MARK: Compose

    /// A request checked and rendered the way push-render will: the devices it reaches now and the
    /// payload per locale.
    public struct Preview: Sendable {
        public var request: PushRequest
        public var body: [UInt8]
        /// nil for a broadcast channel (APNs knows who listens, not us).
        public var targets: Int?
        public var locales: [(locale: String, payload: String)]
    }

    /// Checks `body` (a push request) with push-render's code, renders it for every catalog's locale
    /// (or once, when the keys go to the device) and counts its devices.
    public func preview(_ body: [UInt8]) async throws(ConsoleError) -> Preview {
        let request: PushRequest
        let renderer: NotificationRenderer
        do throws(PushRequestError) {
            request = try PushRequest(body: body, apps: apps)
            renderer = NotificationRenderer(request: request, catalogs: catalogs)
            try renderer.preflight()
        } catch {
            throw ConsoleError(field: error.field, error.reason)
        }
        var locales: [(locale: String, payload: String)] = []
        do throws(PushRequestError) {
            if request.localization == .server {
                let names = [catalogs.defaultLocale] + catalogs.catalogs.keys.filter { $0 != catalogs.defaultLocale }.sorted()
                for locale in names {
                    locales.append((locale, Self.shown(try renderer.render(locale: locale, settings: NotificationSettings()))))
                }
            } else {
                locales.append(("device", Self.shown(try renderer.render(locale: nil, settings: NotificationSettings()))))
            }
        } catch {
            throw ConsoleError(field: error.field, error.reason)
        }
        return Preview(request: request, body: body, targets: try await targetCount(request), locales: locales)
    }

    /// The payload of a render, or why nothing would be sent.
    static func shown(_ result: RenderResult) -> String {
        switch result {
        case .notification(let notification): notification.payloadString
        case .skipped(let reason): "(nothing is sent: \(reason.rawValue))"
        }
    }

    /// How many devices `request` reaches now: the tokens given, or the sizes of the registry's sets.
    func targetCount(_ request: PushRequest) async throws(ConsoleError) -> Int? {
        let app = request.app.bundleID
        do {
            switch request.target {
            case .tokens(let tokens):
                return tokens.count
            case .users(let users):
                let keys = try await registry.allKeys(app: app)
                return try await cardinality(users.flatMap { user in keys.map { $0.user(user) } })
            case .topic(let topic):
                return try await cardinality(try await registry.allKeys(app: app).map { $0.topic(topic) })
            case .all:
                return try await registry.tokenCounts(app: app).reduce(0) { $0 + $1.tokens }
            case .activity, .pushToStart, .channel:
                return nil
            }
        } catch let error as ConsoleError {
            throw error
        } catch {
            throw ConsoleError.unavailable("the token registry (Redis)", error, logger: logger)
        }
    }

    private func cardinality(_ keys: [String]) async throws -> Int {
        guard !keys.isEmpty else { return 0 }
        var total = 0
        var start = 0
        while start < keys.count {
            let chunk = keys[start..<Swift.min(start + 1000, keys.count)]
            for reply in try await redis.pipeline(chunk.map { RedisCommand(["SCARD", $0]) }) {
                total += Int(try reply.throwingServerError().integer ?? 0)
            }
            start += 1000
        }
        return total
    }

    /// Checks and publishes a request (persistent, confirmed) to `push.requests`, after noting it
    /// `queued` in its report. `operatorName` is logged with the request.
    public func send(_ body: [UInt8], operatorName: String) async throws(ConsoleError) -> Preview {
        let preview = try await preview(body)
        let request = preview.request
        do {
            try await reports.recordQueued(app: request.app.bundleID, requestID: request.id, now: now())
        } catch {
            throw ConsoleError.unavailable("Redis", error, logger: logger)
        }
        do {
            try await amqp.publish(
                AMQPOutboundMessage(
                    exchange: queues.exchange, routingKey: queues.requests.routingKey, body: body,
                    properties: AMQPProperties(contentType: "application/json", persistent: true, timestamp: UInt64(Swift.max(0, now() / 1000)))))
        } catch {
            throw ConsoleError.unavailable("RabbitMQ", error, logger: logger)
        }
        logger.notice(
            "console action",
            metadata: [
                "push.operator": "\(operatorName)", "push.action": "send", "push.app": "\(request.app.bundleID)", "push.request_id": "\(request.id)",
                "push.targets": "\(preview.targets.map(String.init) ?? "channel")", "push.to": "\(request.target.name)",
            ])
        return preview
    }

    // MARK: Reports

    public func report(app: String, requestID: String) async throws(ConsoleError) -> RequestReport {
        guard apps.app(bundleID: app) != nil else { throw ConsoleError(status: 404, code: "not_found", field: "app", "names no configured app") }
        let found: RequestReport?
        do {
            found = try await reports.report(app: app, requestID: requestID)
        } catch {
            throw ConsoleError.unavailable("Redis", error, logger: logger)
        }
        guard let found else {
            throw ConsoleError(status: 404, code: "not_found", "no report of \(requestID) (unknown, not yet taken by push-render, or expired)")
        }
        return found
    }

    /// The newest `limit` requests over every app, newest first, as summaries (totals; no failures by
    /// reason: ``PushServiceKit/RequestReports/summaries(app:requestIDs:)``).
    /// The newest `limit` reports of `shown` (default: every app).
    public func recentReports(limit: Int, apps shown: [String]? = nil) async throws(ConsoleError) -> [RequestReport] {
        let shown = shown ?? appIDs
        do {
            var recent: [(app: String, id: String, at: Int64)] = []
            for app in shown {
                recent += try await reports.recent(app: app, limit: limit).map { (app, $0.id, $0.at) }
            }
            recent.sort { $0.at > $1.at }
            let newest = recent.prefix(limit)
            var found: [RequestReport] = []
            for app in shown {
                found += try await reports.summaries(app: app, requestIDs: newest.filter { $0.app == app }.map(\.id))
            }
            let order = Dictionary(
                newest.enumerated().map { ("\($0.element.app)\n\($0.element.id)", $0.offset) }, uniquingKeysWith: { first, _ in first })
            found.sort { (order["\($0.app)\n\($0.id)"] ?? 0) < (order["\($1.app)\n\($1.id)"] ?? 0) }
            return found
        } catch {
            throw ConsoleError.unavailable("Redis", error, logger: logger)
        }
    }

    // MARK: Dead letters

    /// The first `limit` dead letters, of them those of `apps`: a letter whose body names no app is
    /// shown only to whoever may read every app's letters.
    public func deadLetters(limit: Int, apps: ConsoleAppSet = .all) async throws(ConsoleError) -> [DeadLetter] {
        let letters: [DeadLetter]
        do {
            letters = try await DeadLetterQueue(amqp: amqp, queues: queues).peek(limit: limit)
        } catch {
            throw ConsoleError.unavailable("RabbitMQ", error, logger: logger)
        }
        return letters.filter { apps == .all || $0.app.map(apps.contains) == true }
    }

    /// Replays the dead letter `key` to `queue` (default: where it came from, or where its kind goes),
    /// when it belongs to one of `apps`.
    public func replay(key: String, to queue: String?, apps: ConsoleAppSet = .all, operatorName: String) async throws(ConsoleError) -> String {
        let result: DeadLetterQueue.Replayed
        do {
            result = try await DeadLetterQueue(amqp: amqp, queues: queues).replay(
                key: key, to: queue, now: UInt64(Swift.max(0, now() / 1000)),
                permitted: { letter in apps == .all || letter.app.map(apps.contains) == true })
        } catch let error as DeadLetterReplayError {
            throw ConsoleError(field: "queue", error.description)
        } catch {
            throw ConsoleError.unavailable("RabbitMQ", error, logger: logger)
        }
        switch result {
        case .replayed(let target):
            logger.notice(
                "console action",
                metadata: ["push.operator": "\(operatorName)", "push.action": "replay", "push.key": "\(key)", "push.queue": "\(target)"])
            return target
        case .notFound(let searched):
            throw ConsoleError(status: 404, code: "not_found", field: "key", "no dead letter \(key) among the first \(searched) (replayed already?)")
        case .noTarget:
            throw ConsoleError(field: "queue", "the letter names no queue and its body is of no known kind: choose the queue")
        case .notPermitted(let app):
            throw ConsoleError(
                status: 403, code: "forbidden", field: "scope",
                "\(operatorName) lacks the scope dead-letters for \(app.map { "the app \($0)" } ?? "letters that name no app")")
        }
    }

    // MARK: Status

    public struct QueueState: Sendable {
        public var name: String
        public var ready: Int?
        public var consumers: Int?
        /// Why it could not be read (nil when it was).
        public var problem: String?
    }

    public struct AppState: Sendable {
        public var app: String
        public var environment: String
        public var auth: String
        public var expiresInDays: Double?
        public var pausedReason: String?
        public var pausedForMilliseconds: Int64?
        public var problems: [String]
        public var warnings: [String]
    }

    public func queueStates() async -> [QueueState] {
        var states: [QueueState] = []
        for name in queues.allQueueNames {
            do {
                let status = try await amqp.queueStatus(name)
                states.append(QueueState(name: name, ready: status.messages, consumers: status.consumers))
            } catch {
                states.append(QueueState(name: name, problem: "\(error)"))
            }
        }
        return states
    }

    /// The credentials and pauses of `shown` (default: every app). Credentials as push-send last
    /// found them (``PushServiceKit/CredentialSummaries``): the console reads no key or certificate.
    public func appStates(of shown: [String]? = nil) async -> [AppState] {
        let shown = shown ?? appIDs
        let paused = (try? await pauseNotes.read(apps: shown)) ?? [:]
        let summaries = (try? await credentialSummaries.read(apps: shown)) ?? [:]
        let seconds = now() / 1000
        return shown.compactMap { apps.app(bundleID: $0) }.map { app in
            guard let summary = summaries[app.bundleID] else {
                let kind: String
                if case .token = app.apns { kind = "token" } else { kind = "certificate" }
                return AppState(
                    app: app.bundleID, environment: app.environment.rawValue, auth: kind, expiresInDays: nil,
                    pausedReason: paused[app.bundleID]?.reason, pausedForMilliseconds: paused[app.bundleID]?.remaining, problems: [],
                    warnings: ["push-send has not reported this app's credentials in the last 3 hours (is it running?)"])
            }
            return AppState(
                app: app.bundleID, environment: summary.environment, auth: summary.kind,
                expiresInDays: summary.expiresAt.map { (Double($0) - Double(seconds)) / 86_400 }, pausedReason: paused[app.bundleID]?.reason,
                pausedForMilliseconds: paused[app.bundleID]?.remaining, problems: summary.problems, warnings: summary.warnings)
        }
    }

    // MARK: Tokens

    static func token(_ text: String) throws(ConsoleError) -> DeviceToken {
        do {
            return try DeviceToken(normalizing: text)
        } catch {
            throw ConsoleError(field: "token", error.reason)
        }
    }

    func checkedApp(_ app: String) throws(ConsoleError) -> String {
        guard apps.app(bundleID: app) != nil else { throw ConsoleError(field: "app", "names no configured app") }
        return app
    }

    /// The stored record of a device; nil when it is not registered.
    public func device(app: String, token: String) async throws(ConsoleError) -> DeviceRecord? {
        let app = try checkedApp(app)
        let token = try Self.token(token)
        do {
            return try await registry.record(app: app, token: token)
        } catch {
            throw ConsoleError.unavailable("the token registry (Redis)", error, logger: logger)
        }
    }

    /// Removes a device (as `DELETE` of the registration API does); false when it was not registered.
    public func removeDevice(app: String, token: String, operatorName: String) async throws(ConsoleError) -> Bool {
        let app = try checkedApp(app)
        let device = try Self.token(token)
        let removed: Bool
        do {
            removed = try await registry.delete(app: app, token: device, at: now())
        } catch {
            throw ConsoleError.unavailable("the token registry (Redis)", error, logger: logger)
        }
        logger.notice(
            "console action",
            metadata: [
                "push.operator": "\(operatorName)", "push.action": "token.delete", "push.app": "\(app)", "push.token": "\(device.redacted)",
                "push.removed": "\(removed)",
            ])
        return removed
    }
}
