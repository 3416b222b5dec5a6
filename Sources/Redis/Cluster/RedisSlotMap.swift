/// Which master of a Redis Cluster serves each slot, as learnt from `CLUSTER SLOTS` and corrected by
/// `MOVED` redirects: the routing table of a cluster client, a value tested without a server.
struct RedisSlotMap: Sendable, Equatable {
    /// The masters, in the order the reply named them.
    private(set) var masters: [RedisEndpoint]
    /// For each slot, the index into ``masters`` of the node serving it, or ``unserved``.
    private var owners: [UInt16]

    static let unserved = UInt16.max

    /// A map with no slot served.
    init() {
        masters = []
        owners = Array(repeating: Self.unserved, count: RedisClusterSlot.count)
    }

    /// Reads a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replica…], …]`. A master
    /// whose host is empty is on the host that was asked (`askedHost`); one whose host is `?` (its
    /// address unknown to the node asked) leaves its slots unserved.
    init(clusterSlots reply: RedisReply, askedHost: String) throws(RedisError) {
        self.init()
        guard let ranges = reply.array else {
            throw RedisError(.protocolError, "CLUSTER SLOTS answered \(reply), not an array")
        }
        for range in ranges {
            guard let fields = range.array, fields.count >= 3, let start = fields[0].integer, let end = fields[1].integer,
                0 <= start, start <= end, end < RedisClusterSlot.count, let master = fields[2].array, master.count >= 2,
                let host = master[0].string, let port = master[1].integer, (1...65535).contains(port)
            else {
                throw RedisError(.protocolError, "CLUSTER SLOTS answered an entry this client cannot read: \(range)")
            }
            guard host != "?" else { continue }
            let endpoint = RedisEndpoint(host: host.isEmpty ? askedHost : host, port: Int(port))
            let index = index(of: endpoint)
            for slot in Int(start)...Int(end) { owners[slot] = index }
        }
    }

    /// The master serving `slot`, if the map knows one.
    func master(forSlot slot: Int) -> RedisEndpoint? {
        let index = owners[slot]
        return index == Self.unserved ? nil : masters[Int(index)]
    }

    /// Whether every slot has a master: the cluster is usable as a whole.
    var servesEverySlot: Bool { !owners.contains(Self.unserved) }

    /// The number of slots each master serves.
    var slotsPerMaster: [RedisEndpoint: Int] {
        var counts: [RedisEndpoint: Int] = [:]
        for index in owners where index != Self.unserved { counts[masters[Int(index)], default: 0] += 1 }
        return counts
    }

    /// A `MOVED` redirect: `slot` is now served by `endpoint`.
    mutating func move(slot: Int, to endpoint: RedisEndpoint) {
        owners[slot] = index(of: endpoint)
    }

    private mutating func index(of endpoint: RedisEndpoint) -> UInt16 {
        if let index = masters.firstIndex(of: endpoint) { return UInt16(index) }
        masters.append(endpoint)
        return UInt16(masters.count - 1)
    }
}

/// A Redis Cluster redirect in an error reply: `MOVED 3999 10.0.0.2:6381` (the slot lives there now:
/// update the map) or `ASK 3999 10.0.0.2:6381` (while the slot migrates, ask there once, after
/// `ASKING`). An empty host (`MOVED 3999 :6381`) is the host of the node that answered.
struct RedisRedirect: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case moved
        case ask
    }

    let kind: Kind
    let slot: Int
    let endpoint: RedisEndpoint

    init?(errorMessage message: String, answeredBy node: RedisEndpoint) {
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisClusterSlot.count).contains(slot),
            let colon = parts[2].lastIndex(of: ":"), let port = Int(parts[2][parts[2].index(after: colon)...]), (1...65535).contains(port)
        else { return nil }
        switch parts[0] {
        case "MOVED": kind = .moved
        case "ASK": kind = .ask
        default: return nil
        }
        var host = parts[2][..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        self.slot = slot
        self.endpoint = RedisEndpoint(host: host.isEmpty ? node.host : String(host), port: port)
    }
}
