import Logging
import Synchronization

/// The Redis Cluster side of a ``RedisClient``: learns which master serves each slot
/// (`CLUSTER SLOTS`), keeps a small pool of connections per master, sends each command to the master
/// of its key's slot (``RedisCommand/routingKey``) and splits a pipeline into one pipeline per master,
/// run concurrently, with the replies put back in order.
///
/// Changes in the cluster are followed as they show:
/// - `MOVED slot host:port` (the slot has a new master: resharding, or a replica promoted): the map
///   is corrected at once, the command sent there, and the whole map read again in the background;
/// - `ASK slot host:port` (the slot is migrating): the command is sent there once, after `ASKING`;
/// - `TRYAGAIN` / `CLUSTERDOWN` (a migration or a failover in progress): the command is tried again
///   after 50, 100, 200 … ms while its command timeout lasts, then fails as a retryable
///   ``RedisError/Code/connectionFailed`` (the server did not run it);
/// - a master that cannot be reached: the map is read again from any node that answers, and a
///   command that was never sent goes to the slot's new master if a replica took over.
/// At most ``maximumRedirects`` redirects per command, so a misconfigured cluster cannot loop.
///
/// A master that was killed is reported failed by the others only after the cluster's node timeout,
/// and its replica promoted after that: until then commands for its slots fail as unavailable, as
/// with a single Redis that restarts. What a master acknowledged but had not yet replicated can be
/// lost in a failover (Redis replication is asynchronous); the registry's writes are idempotent and
/// its consumers acknowledge a message only after Redis did, so a lost write is a redelivered one.
final class RedisClusterRouter: Sendable {
    let configuration: RedisConfiguration
    private let logger: Logger
    private let state = Mutex(State())
    /// Redirects one command may follow.
    static let maximumRedirects = 5

    private struct State {
        var map = RedisSlotMap()
        var pools: [RedisEndpoint: NodePool] = [:]
        /// The map is being read again; callers that need it wait for this task.
        var refresh: Task<Void, Never>?
        var lastRefresh: ContinuousClock.Instant?
        var closed = false
    }

    /// The connections to one node, used round-robin.
    final class NodePool: Sendable {
        let endpoint: RedisEndpoint
        let connections: [RedisConnection]
        private let next = Atomic<Int>(0)

        init(endpoint: RedisEndpoint, configuration: RedisConfiguration, logger: Logger) {
            self.endpoint = endpoint
            var node = configuration
            node.endpoint = endpoint
            node.clusterSeeds = []
            self.connections = (0..<max(1, configuration.poolSize)).map { index in
                RedisConnection(configuration: node, logger: logger, name: "redis-\(endpoint.port)-\(index)")
            }
        }

        var connection: RedisConnection {
            let index = next.add(1, ordering: .relaxed).oldValue
            return connections[Int(UInt(bitPattern: index) % UInt(connections.count))]
        }

        var isConnected: Bool { connections.allSatisfy(\.isConnected) }

        func close() async {
            for connection in connections { await connection.close() }
        }
    }

    init(configuration: RedisConfiguration, logger: Logger) {
        precondition(configuration.isCluster, "a cluster router needs redis+cluster:// seeds")
        self.configuration = configuration
        self.logger = logger
    }

    /// Reads the slot map from the first seed that answers; throws the last seed's error when none
    /// does, or when the cluster does not serve every slot.
    func connect() async throws(RedisError) {
        await refreshMap(force: true)
        let map = state.withLock { $0.map }
        guard !map.masters.isEmpty else {
            throw RedisError(
                .connectionFailed,
                "no seed of the Redis Cluster answered CLUSTER SLOTS (\(configuration.clusterSeeds.map(\.description).joined(separator: ", ")))")
        }
        guard map.servesEverySlot else {
            throw RedisError(.connectionFailed, "the Redis Cluster does not serve every slot (is it still being created?)")
        }
    }

    /// Whether the map is known and every master's connections are up (for readiness checks). When
    /// not, the map is read again in the background (at most once a second from here): a master
    /// that died and was replaced by its replica leaves the map there, even in an idle service.
    var isConnected: Bool {
        let (map, pools, last) = state.withLock { ($0.map, $0.pools, $0.lastRefresh) }
        let connected = map.servesEverySlot && map.masters.allSatisfy { pools[$0]?.isConnected ?? false }
        if !connected, last.map({ ContinuousClock.now - $0 > .seconds(1) }) ?? true {
            Task { await self.refreshMap(force: false) }
        }
        return connected
    }

    /// The master serving `key`'s slot, as the map says now (nil before the map is known).
    func master(forKey key: String) -> RedisEndpoint? {
        state.withLock { $0.map.master(forSlot: RedisClusterSlot.slot(of: key)) }
    }

    /// Masters and how many slots each serves, as the map says now (for metrics and tools).
    var slotsPerMaster: [RedisEndpoint: Int] { state.withLock { $0.map.slotsPerMaster } }

    func close() async {
        let pools = state.withLock { state -> [NodePool] in
            state.closed = true
            state.refresh?.cancel()
            defer { state.pools.removeAll() }
            return Array(state.pools.values)
        }
        for pool in pools { await pool.close() }
    }

    // MARK: Sending

    func send(_ command: RedisCommand) async throws(RedisError) -> RedisReply {
        let deadline = ContinuousClock.now + configuration.commandTimeout
        var target = try await node(for: command.routingKey)
        var asking = false
        var pause: Duration = .milliseconds(50)
        var redirects = 0
        while true {
            let reply: RedisReply
            do throws(RedisError) {
                let connection = try pool(for: target).connection
                reply = asking ? try await connection.pipeline([RedisCommand(["ASKING"]), command])[1] : try await connection.send(command)
            } catch {
                guard isNotSent(error), redirects < Self.maximumRedirects else { throw error }
                // Never sent: if a replica took over the slot meanwhile, send it there.
                await refreshMap(force: false)
                let now = try await node(for: command.routingKey)
                guard now != target else { throw error }
                target = now
                redirects += 1
                continue
            }
            asking = false
            guard let message = reply.errorMessage else { return reply }
            if let redirect = RedisRedirect(errorMessage: message, answeredBy: target) {
                redirects += 1
                guard redirects <= Self.maximumRedirects else {
                    throw RedisError(.protocolError, "more than \(Self.maximumRedirects) redirects for \(command) (last: \(message))")
                }
                if redirect.kind == .moved { noteMoved(redirect) } else { asking = true }
                target = redirect.endpoint
                continue
            }
            if Self.isTransient(message) {
                guard ContinuousClock.now + pause < deadline else {
                    throw RedisError(.connectionFailed, "the Redis Cluster did not run \(command) within \(configuration.commandTimeout): \(message)")
                }
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .milliseconds(500))
                await refreshMap(force: false)
                target = try await node(for: command.routingKey)
                continue
            }
            return reply
        }
    }

    /// Sends `commands` as one pipeline per master, concurrently, and returns the replies in order.
    ///
    /// When a master's part could not be sent (no connection came up), the map is read again and
    /// **that part alone** goes once more, to the slots' masters now: the other masters' parts ran,
    /// and running them again would run every command there twice (a removal that then finds
    /// nothing, a counter counted twice). A part that may have run (the connection dropped after
    /// sending) fails the call, as with one server.
    func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisReply] {
        if commands.isEmpty { return [] }
        var replies = [RedisReply](repeating: .null, count: commands.count)
        var unsent = Array(commands.indices)
        for attempt in 0..<2 {
            guard let (notSent, error) = try await sendParts(unsent, of: commands, into: &replies) else { break }
            guard attempt == 0 else { throw error }
            await refreshMap(force: false)
            unsent = notSent
        }
        // Redirected or refused for the moment: send those again, one by one, through send().
        for index in replies.indices {
            guard let message = replies[index].errorMessage,
                message.hasPrefix("MOVED ") || message.hasPrefix("ASK ") || Self.isTransient(message)
            else { continue }
            replies[index] = try await send(commands[index])
        }
        return replies
    }

    /// Sends the commands at `indices`, one pipeline per master (each keeping their order), and
    /// puts the replies in `replies`. Returns the indices of the parts that were not sent, with the
    /// error, or nil when every part was answered; throws any other error.
    private func sendParts(
        _ indices: [Int], of commands: [RedisCommand], into replies: inout [RedisReply]
    ) async throws(RedisError) -> (notSent: [Int], error: RedisError)? {
        var groups: [RedisEndpoint: [Int]] = [:]
        for index in indices {
            groups[try await node(for: commands[index].routingKey), default: []].append(index)
        }
        let parts = try groups.map { endpoint, indices throws(RedisError) in (pool: try pool(for: endpoint), indices: indices) }
        /// One master's part, answered or failed.
        @Sendable func send(_ part: (pool: NodePool, indices: [Int])) async -> (indices: [Int], result: Result<[RedisReply], RedisError>) {
            do throws(RedisError) {
                let group = part.indices.count == commands.count ? commands : part.indices.map { commands[$0] }
                return (part.indices, .success(try await part.pool.connection.pipeline(group)))
            } catch {
                return (part.indices, .failure(error))
            }
        }
        let results: [(indices: [Int], result: Result<[RedisReply], RedisError>)]
        if parts.count == 1, let part = parts.first {
            results = [await send(part)]
        } else {
            results = await withTaskGroup(of: (indices: [Int], result: Result<[RedisReply], RedisError>).self) { group in
                for part in parts { group.addTask { await send(part) } }
                var all: [(indices: [Int], result: Result<[RedisReply], RedisError>)] = []
                for await result in group { all.append(result) }
                return all
            }
        }
        var notSent: [Int] = []
        var notSentError: RedisError?
        var failure: RedisError?
        for (indices, result) in results {
            switch result {
            case .success(let answered):
                for (index, reply) in zip(indices, answered) { replies[index] = reply }
            case .failure(let error) where isNotSent(error):
                notSent += indices
                notSentError = error
            case .failure(let error):
                failure = error
            }
        }
        if let failure { throw failure }
        guard let notSentError else { return nil }
        return (notSent.sorted(), notSentError)
    }

    /// Whether `error` says the command was never sent: no connection came up, or a map refresh
    /// closed the pool of a node that is no longer a master.
    private func isNotSent(_ error: RedisError) -> Bool {
        error.code == .connectionFailed || (error.code == .closed && !state.withLock { $0.closed })
    }

    /// `TRYAGAIN` (a multi-key command during a migration) and `CLUSTERDOWN` (a failover in
    /// progress): the server did not run the command, and will soon.
    static func isTransient(_ message: String) -> Bool {
        message.hasPrefix("TRYAGAIN") || message.hasPrefix("CLUSTERDOWN")
    }

    // MARK: The map

    /// The master for `key`'s slot (any master for a keyless command), reading the map first if it
    /// is not known yet.
    private func node(for key: ArraySlice<UInt8>?) async throws(RedisError) -> RedisEndpoint {
        for attempt in 0..<2 {
            let found = state.withLock { state -> RedisEndpoint? in
                guard let key else { return state.map.masters.first }
                return state.map.master(forSlot: RedisClusterSlot.slot(of: key))
            }
            if let found { return found }
            if attempt == 0 { await refreshMap(force: true) }
        }
        throw RedisError(
            .connectionFailed,
            "no master of the Redis Cluster serves slot \(key.map { String(RedisClusterSlot.slot(of: $0)) } ?? "?") (seeds \(configuration.clusterSeeds.map(\.description).joined(separator: ", ")))"
        )
    }

    private func pool(for endpoint: RedisEndpoint) throws(RedisError) -> NodePool {
        try state.withLock { state throws(RedisError) -> NodePool in
            guard !state.closed else { throw RedisError.closed(endpoint) }
            if let pool = state.pools[endpoint] { return pool }
            let pool = NodePool(endpoint: endpoint, configuration: configuration, logger: logger)
            state.pools[endpoint] = pool
            return pool
        }
    }

    private func noteMoved(_ redirect: RedisRedirect) {
        state.withLock { $0.map.move(slot: redirect.slot, to: redirect.endpoint) }
        logger.debug("slot moved", metadata: ["redis.slot": "\(redirect.slot)", "redis.node": "\(redirect.endpoint)"])
        Task { await self.refreshMap(force: false) }
    }

    /// Reads the map again from the masters it knows, then the seeds, whichever answers first; at
    /// most once per 100 ms unless `force`d, and once at a time (later callers wait for it).
    /// Connections to nodes that are no longer masters are closed.
    func refreshMap(force: Bool) async {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard !state.closed else { return nil }
            if let running = state.refresh { return running }
            if !force, let last = state.lastRefresh, ContinuousClock.now - last < .milliseconds(100) { return nil }
            let task = Task { await self.readMap() }
            state.refresh = task
            return task
        }
        await task?.value
    }

    private func readMap() async {
        let candidates = state.withLock { state in state.map.masters } + configuration.clusterSeeds
        var tried: Set<RedisEndpoint> = []
        var newMap: RedisSlotMap?
        var lastError = ""
        for endpoint in candidates where tried.insert(endpoint).inserted {
            do throws(RedisError) {
                let reply = try await pool(for: endpoint).connection.send(["CLUSTER", "SLOTS"])
                if let message = reply.errorMessage { throw RedisError(.serverError, message) }
                let map = try RedisSlotMap(clusterSlots: reply, askedHost: endpoint.host)
                guard !map.masters.isEmpty else { continue }
                newMap = map
                break
            } catch {
                lastError = error.message
            }
        }
        let stale = state.withLock { state -> [NodePool] in
            defer {
                state.refresh = nil
                state.lastRefresh = .now
            }
            guard let newMap else { return [] }
            if newMap != state.map {
                logger.info(
                    "Redis Cluster map read",
                    metadata: [
                        "redis.masters": "\(newMap.masters.map(\.description).joined(separator: ","))", "redis.complete": "\(newMap.servesEverySlot)",
                    ])
            }
            state.map = newMap
            // Every master gets its connections now, so readiness means "can serve every slot".
            for master in newMap.masters where state.pools[master] == nil {
                state.pools[master] = NodePool(endpoint: master, configuration: configuration, logger: logger)
            }
            let keep = Set(newMap.masters)
            let gone = state.pools.filter { !keep.contains($0.key) }
            for endpoint in gone.keys { state.pools[endpoint] = nil }
            return Array(gone.values)
        }
        if newMap == nil {
            logger.warning("no node of the Redis Cluster answered CLUSTER SLOTS", metadata: ["redis.error": "\(lastError)"])
        }
        for pool in stale { await pool.close() }
    }
}
