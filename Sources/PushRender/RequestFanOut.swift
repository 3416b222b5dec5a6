import AMQP
import Logging
import Metrics
import PushCore
import Redis
import TokenRegistry

/// What a fan-out needs from outside: the broker, Redis, names, settings, metrics and the clock.
struct FanOutDependencies: Sendable {
    let amqp: AMQPConnection
    let redis: any RedisCommandExecutor
    let queues: PushQueues
    let configuration: RenderConfiguration
    let store: RenderProgressStore
    /// Each app's registry layout (shared by the consumer's fan-outs).
    let layouts: RegistryLayouts
    let metrics: RenderMetrics
    let now: @Sendable () -> Int64
}

/// How a fan-out ended.
enum FanOutOutcome: Sendable, Equatable {
    /// Every batch is confirmed and the request is marked done.
    case finished(RenderProgress)
    /// Stopped between rounds (shutdown); the position is saved, the lease is still ours.
    case stopped(RenderProgress)
    /// Another instance took the request over (we stalled past the lease); nothing more was written.
    case leaseLost
}

/// Why a fan-out could not go on; its progress up to the last confirmed round is saved.
enum FanOutError: Error, Sendable {
    case redis(RedisError)
    case publish(AMQPError)

    var message: String {
        switch self {
        case .redis(let error): "Redis: \(error.message)"
        case .publish(let error): "publish to push.send: \(error.message)"
        }
    }
}

/// Turns one push request into send batches, round by round:
///
/// 1. **Scan** up to ``RenderConfiguration/roundTokens`` tokens from the target (`SSCAN` pages of
///    every shard's set at once, or `to.tokens`), looking each page's devices up with one pipelined
///    `HMGET` per token while the next page is scanned;
/// 2. **Render**: each device gets its kind's shared rendering from the ``VariantTable``; repeats of
///    a token are dropped (``TokenDeduplicator``); devices left with nothing are counted and skipped;
/// 3. **Batch**: tokens are grouped by (environment, rendered payload, push type, priority) into
///    batches of up to ``RenderConfiguration/batchSize``; at the end of the round every partial batch
///    is closed too, so a round owns exactly the batches of its tokens;
/// 4. **Publish** the round's batches to `push.send` together (kept in flight at once) and wait for
///    every confirm; then **save** the position after the round, the batch sequence and counts in Redis.
///
/// Round k+1 is scanned and rendered while round k is being published and saved. A crash re-runs at
/// most the round whose confirms were not yet saved: batches of earlier rounds are never re-sent. That
/// one round's ``RoundPlan`` (each token's mark set and slot) is in Redis before its first batch is
/// published; the resumed fan-out puts every token the plan knows back into its mark set and slot,
/// so push-send's dedupe marks skip what APNs accepted, even when the registry changed in between
/// and the round's batches came out different.
final class RequestFanOut {
    private let request: PushRequest
    private let dependencies: FanOutDependencies
    private let scanner: TargetScanner
    private let lookup: DeviceLookup
    private let variants: VariantTable
    private var deduplicator = TokenDeduplicator()
    /// Where the round a crash interrupted placed its tokens (empty when nothing was interrupted).
    private var carried = RoundPlan(startSequence: 0)
    /// Tokens of ``carried`` no round of this run has placed yet: each new round's plan carries them
    /// on, so an interruption of the resumed run still finds their first places.
    private var unplaced: Set<UInt64> = []
    private let logger: Logger
    /// The most tokens one round held (scanned, not yet published): the fan-out's memory bound.
    private(set) var largestRoundTokens = 0
    /// Whether this run continues an earlier one (its tokens are not in ``deduplicator``).
    private var resumed = false
    /// Whether the fingerprints of the tokens rendered before the resume are in ``deduplicator``.
    private var preloadedRendered = false

    init(request: PushRequest, renderer: NotificationRenderer, dependencies: FanOutDependencies, logger: Logger) {
        self.request = request
        self.dependencies = dependencies
        let prefix = dependencies.configuration.keyPrefix
        let scanner = TargetScanner(
            redis: dependencies.redis, keyPrefix: prefix, app: request.app.bundleID, target: request.target,
            pageSize: TokenRegistry.scanBatchSize, attributesType: request.attributesType, isLiveActivity: request.pushType == .liveactivity)
        self.scanner = scanner
        self.lookup = DeviceLookup(redis: dependencies.redis, keyPrefix: prefix, app: request.app.bundleID, records: scanner.records)
        self.variants = VariantTable(renderer: renderer)
        self.logger = logger
    }

    /// Localisation keys some device kinds left to the device (no catalog along their chain had them).
    var deviceFallbackKeys: [String] {
        var keys: [String] = []
        for variant in variants.variants {
            for key in variant.notification.deviceFallbackKeys where !keys.contains(key) { keys.append(key) }
        }
        return keys
    }

    /// One round's output: its batches as broker messages, and where the next round starts.
    struct Round: Sendable {
        var messages: [AMQPOutboundMessage] = []
        var position: TargetPosition
        var sequence: Int
        var tokens = 0
        var skipped: [String: Int] = [:]
        var fallbackTokens = 0
        var truncatedTokens = 0
        /// ``TokenDeduplicator`` fingerprints of the tokens in ``messages``, kept in Redis with the
        /// progress so a resume after a Redis restart knows what was rendered.
        var fingerprints: [UInt64] = []
        /// Each token's mark set and slot, saved before ``messages`` are published.
        var plan: RoundPlan
        var skippedTotal: Int { skipped.values.reduce(0, +) }
    }

    /// Runs rounds from `progress` until the target is exhausted, `shouldStop` says so (checked between
    /// rounds), or a round fails.
    ///
    /// A saved cursor of a server that restarted or was replaced since is void (``TargetScanner``):
    /// that shard's set is scanned again from its start, skipping the tokens this request rendered
    /// before (their fingerprints are saved with every round).
    func run(from progress: RenderProgress, owner: String, shouldStop: @Sendable () -> Bool) async throws(FanOutError) -> FanOutOutcome {
        var totals = progress
        var position = progress.position ?? .start
        resumed = progress.position != nil
        do {
            if let plan = try await dependencies.store.roundPlan(app: request.app.bundleID, requestID: request.id),
                plan.startSequence >= progress.sequence
            {
                // A round was being published when the last owner stopped: its tokens keep their places.
                carried = plan
                unplaced = Set(plan.fingerprints)
                logger.notice(
                    "resuming a round that may have been sent in part; its tokens keep their delivery marks",
                    metadata: ["push.batches": "\(progress.sequence)", "push.round_tokens": "\(plan.count)"])
            }
        } catch {
            throw .redis(error)
        }
        var inFlight: Task<Result<Bool, FanOutError>, Never>?
        let dependencies = self.dependencies
        let request = self.request
        func settle(_ task: Task<Result<Bool, FanOutError>, Never>?) async throws(FanOutError) -> Bool {
            guard let task else { return true }
            return try await task.value.get()
        }
        repeat {
            if shouldStop() { break }
            let round: Round
            do {
                round = try await buildRound(from: position, sequence: totals.sequence)
            } catch {
                _ = await inFlight?.value
                throw error
            }
            guard try await settle(inFlight) else { return .leaseLost }
            totals.position = round.position
            totals.sequence = round.sequence
            totals.tokens += round.tokens
            totals.skipped += round.skippedTotal
            totals.isDone = scanner.isFinished(round.position)
            let snapshot = totals
            inFlight = Self.startPublishing(round, progress: snapshot, request: request, owner: owner, dependencies: dependencies)
            position = round.position
        } while !scanner.isFinished(position)
        guard try await settle(inFlight) else { return .leaseLost }
        if totals.isDone { return .finished(totals) }
        if scanner.isFinished(position) {
            // Nothing was left to scan after a resume: mark done.
            totals.isDone = true
            let saved: Bool
            do {
                saved = try await dependencies.store.save(
                    app: request.app.bundleID, requestID: request.id, owner: owner, progress: totals, now: dependencies.now())
            } catch {
                throw .redis(error)
            }
            return saved ? .finished(totals) : .leaseLost
        }
        return .stopped(totals)
    }

    private static func startPublishing(
        _ round: Round, progress: RenderProgress, request: PushRequest, owner: String, dependencies: FanOutDependencies
    ) -> Task<Result<Bool, FanOutError>, Never> {
        Task { await publishAndSave(round, progress: progress, request: request, owner: owner, dependencies: dependencies) }
    }

    /// Publishes a round's batches with confirms, then saves the progress after it.
    ///
    /// - Returns: `.success(false)` when the lease was lost.
    private static func publishAndSave(
        _ round: Round, progress: RenderProgress, request: PushRequest, owner: String, dependencies: FanOutDependencies
    ) async -> Result<Bool, FanOutError> {
        if !round.messages.isEmpty {
            do {
                // Only the lease holder publishes: an instance that stalled past its lease stops here.
                guard try await dependencies.store.saveRoundPlan(app: request.app.bundleID, requestID: request.id, owner: owner, plan: round.plan)
                else { return .success(false) }
            } catch {
                return .failure(.redis(error))
            }
            let results = await dependencies.amqp.publish(round.messages)
            for result in results {
                if case .failure(let error) = result { return .failure(.publish(error)) }
            }
        }
        let metrics = dependencies.metrics
        metrics.batchesPublished.increment(by: round.messages.count)
        metrics.tokensTargeted.increment(by: round.tokens)
        metrics.localizationFallbacks.increment(by: round.fallbackTokens)
        metrics.truncated.increment(by: round.truncatedTokens)
        for (reason, count) in round.skipped { metrics.skipped(reason, count: count) }
        do {
            try await dependencies.store.appendRendered(app: request.app.bundleID, requestID: request.id, fingerprints: round.fingerprints)
            let saved = try await dependencies.store.save(
                app: request.app.bundleID, requestID: request.id, owner: owner, progress: progress, now: dependencies.now())
            return .success(saved)
        } catch {
            return .failure(.redis(error))
        }
    }

    // MARK: Building a round

    /// The one round of a channel target: one broadcast batch, rendered for the default locale (a
    /// broadcast reaches devices the registry does not know) in the app's environment.
    private func broadcastRound(channel: String, sequence: Int) -> Round {
        var round = Round(position: TargetPosition(part: 1), sequence: sequence, plan: RoundPlan(startSequence: sequence))
        let entry: VariantTable.Entry
        do {
            entry = try variants.entry(locale: nil, settings: NotificationSettings())
        } catch {
            logger.error("the broadcast's rendering failed after the preflight passed", metadata: ["push.error": "\(error)"])
            round.skipped["render_failed"] = 1
            return round
        }
        guard case .variant(let variant) = entry else {
            if case .skipped(let reason) = entry { round.skipped[reason.rawValue] = 1 }
            return round
        }
        round.sequence += 1
        let batchID = "\(request.id)/\(round.sequence)"
        let createdAt = dependencies.now()
        let body = variant.encoder(for: request.app.environment, request: request).encodeBroadcast(
            batchID: batchID, channel: channel, createdAt: createdAt)
        round.messages.append(
            AMQPOutboundMessage(
                exchange: dependencies.queues.exchange, routingKey: dependencies.queues.send.routingKey, body: body,
                properties: AMQPProperties(messageID: SendBatch.messageID(forBatchID: batchID), timestamp: UInt64(max(0, createdAt / 1000)))))
        return round
    }

    private struct GroupKey: Hashable, Comparable {
        let environment: AppConfiguration.Environment
        let variant: Int
        /// The carried mark set (``RoundPlan``) the group's tokens keep, or nil for new batches.
        let markSet: String?

        static func < (lhs: GroupKey, rhs: GroupKey) -> Bool {
            (lhs.variant, lhs.environment.rawValue, lhs.markSet ?? "") < (rhs.variant, rhs.environment.rawValue, rhs.markSet ?? "")
        }
    }

    /// The tokens of one open batch, with their fingerprints and (carried groups) slots.
    private struct OpenBatch {
        var tokens: [DeviceToken] = []
        var fingerprints: [UInt64] = []
        var slots: [Int] = []
    }

    /// A set is being scanned again from its start (its server changed since its cursor was
    /// saved): in a resumed run, the tokens rendered before the resume must be skipped too.
    private func preloadRendered(at position: TargetPosition) async throws(RedisError) {
        guard resumed, !preloadedRendered else { return }
        let rendered = try await dependencies.store.rendered(app: request.app.bundleID, requestID: request.id)
        deduplicator.preload(rendered)
        preloadedRendered = true
        logger.warning(
            "a Redis server restarted or was replaced since this request's last round: its scan cursors are void, so those sets are scanned again from their start, skipping the tokens rendered before",
            metadata: ["push.part": "\(position.part)", "push.rendered": "\(rendered.count)"])
    }

    private func buildRound(from start: TargetPosition, sequence: Int) async throws(FanOutError) -> Round {
        if case .channel(let channel) = request.target { return broadcastRound(channel: channel, sequence: sequence) }
        var round = Round(position: start, sequence: sequence, plan: RoundPlan(startSequence: sequence))
        let roundTokens = dependencies.configuration.roundTokens
        let batchSize = dependencies.configuration.batchSize
        let lookup = self.lookup
        var pages: [(tokens: [ScannedToken], devices: Task<Result<[LookedUpDevice], RedisError>, Never>)] = []
        var scanned = 0
        let state: RegistryState
        do {
            state = try await dependencies.layouts.state(app: request.app.bundleID)
        } catch {
            throw .redis(error.underlying ?? RedisError(.connectionFailed, error.message))
        }
        do {
            while !scanner.isFinished(round.position), scanned < roundTokens {
                let page = try await scanner.page(at: round.position, state: state)
                if page.restarted { try await preloadRendered(at: round.position) }
                round.position = page.next
                scanned += page.tokens.count + page.unreadable
                if page.unreadable > 0 { round.skipped[SkipReason.unreadableRecord.rawValue, default: 0] += page.unreadable }
                guard !page.tokens.isEmpty else { continue }
                let tokens = page.tokens
                pages.append(
                    (
                        tokens,
                        Task { () -> Result<[LookedUpDevice], RedisError> in
                            do throws(RedisError) { return .success(try await lookup.devices(tokens, state: state)) } catch { return .failure(error) }
                        }
                    ))
            }
        } catch {
            for page in pages { _ = await page.devices.value }
            throw .redis(error)
        }
        largestRoundTokens = max(largestRoundTokens, scanned)

        var open: [GroupKey: OpenBatch] = [:]
        let createdAt = dependencies.now()
        func close(_ key: GroupKey, _ batch: OpenBatch) {
            let tokens = batch.tokens
            let variant = variants.variants[key.variant]
            round.sequence += 1
            let batchID = "\(request.id)/\(round.sequence)"
            let encoder = variant.encoder(for: key.environment, request: request)
            let body: [UInt8]
            if let markSet = key.markSet {
                body = encoder.encode(batchID: batchID, tokens: tokens, createdAt: createdAt, marks: (markSet, batch.slots))
                round.plan.add(markSet: markSet, fingerprints: batch.fingerprints, slots: batch.slots)
            } else {
                body = encoder.encode(batchID: batchID, tokens: tokens, createdAt: createdAt)
                round.plan.add(
                    markSet: SendBatch.markSet(batchID: batchID, tokens: tokens.map(\.hex)), fingerprints: batch.fingerprints,
                    slots: Array(tokens.indices))
            }
            round.messages.append(
                AMQPOutboundMessage(
                    exchange: dependencies.queues.exchange,
                    routingKey: dependencies.queues.send.routingKey,
                    body: body,
                    properties: AMQPProperties(
                        messageID: SendBatch.messageID(forBatchID: batchID), timestamp: UInt64(max(0, createdAt / 1000)))
                ))
            round.tokens += tokens.count
            round.fingerprints.append(contentsOf: batch.fingerprints)
            if !variant.notification.deviceFallbackKeys.isEmpty { round.fallbackTokens += tokens.count }
            if variant.notification.truncated { round.truncatedTokens += tokens.count }
        }
        var failure: RedisError?
        for page in pages {
            let devices: [LookedUpDevice]
            switch await page.devices.value {
            case .success(let found): devices = found
            case .failure(let error):
                failure = failure ?? error
                continue
            }
            guard failure == nil else { continue }
            for (scanned, device) in zip(page.tokens, devices) {
                let token = scanned.token
                let fingerprint = TokenDeduplicator.fingerprint(token.hex)
                if case .registered = device {
                } else if case .unregistered = device, scanner.tokensAreListed {
                } else if deduplicator.contains(fingerprint: fingerprint) {
                    // Sent already; what it looks like now does not matter.
                    round.skipped["duplicate", default: 0] += 1
                    continue
                }
                let environment: AppConfiguration.Environment
                let locale: String?
                let settings: NotificationSettings
                switch device {
                case .registered(let registeredEnvironment, let registeredLocale, let registeredSettings):
                    (environment, locale, settings) = (registeredEnvironment, registeredLocale, registeredSettings)
                case .unregistered where scanner.tokensAreListed:
                    // A listed token the registry does not know: other services may know tokens directly,
                    // so it gets the app's environment, the default locale and every part enabled.
                    (environment, locale, settings) = (request.app.environment, nil, NotificationSettings())
                case .unregistered:
                    round.skipped[SkipReason.unregistered.rawValue, default: 0] += 1
                    continue
                case .unreadable:
                    round.skipped[SkipReason.unreadableRecord.rawValue, default: 0] += 1
                    continue
                case .notTargeted:
                    continue
                }
                // Remembered only now that it is going to be sent: a token skipped above may turn up
                // again where it is registered (a device that moved to another layout meanwhile).
                guard deduplicator.insert(fingerprint: fingerprint) else {
                    round.skipped["duplicate", default: 0] += 1
                    continue
                }
                let entry: VariantTable.Entry
                do {
                    entry = try variants.entry(locale: locale, settings: settings)
                } catch {
                    logger.error("a device's rendering failed after the preflight passed; skipping it", metadata: ["push.error": "\(error)"])
                    round.skipped["render_failed", default: 0] += 1
                    continue
                }
                switch entry {
                case .skipped(let reason):
                    round.skipped[reason.rawValue, default: 0] += 1
                case .variant(let variant):
                    let place = carried.isEmpty ? nil : carried.place(of: fingerprint)
                    if place != nil { unplaced.remove(fingerprint) }
                    let key = GroupKey(environment: environment, variant: variant.id, markSet: place?.markSet)
                    open[key, default: OpenBatch()].tokens.append(token)
                    open[key]!.fingerprints.append(fingerprint)
                    if let place { open[key]!.slots.append(place.slot) }
                    if open[key]!.tokens.count >= batchSize {
                        close(key, open.removeValue(forKey: key)!)
                    }
                }
            }
        }
        if let failure { throw .redis(failure) }
        if !unplaced.isEmpty { round.plan.carryOver(unplaced, from: carried) }
        for key in open.keys.sorted() {
            close(key, open[key]!)
        }
        deduplicator.endRound()
        return round
    }
}
