/// Which broker of a cluster a connection uses: it starts at a random one, so a fleet of services
/// spreads its connections over the nodes, and after every failure (a lost connection or a failed
/// attempt) moves on to the next in the listed order, wrapping around. Spacing the attempts is
/// ``AMQPConfiguration/reconnectBackoff``'s job; with one broker this always answers 0.
struct BrokerRotation: Sendable, Equatable {
    let count: Int
    /// The index of the broker to connect to now.
    private(set) var current: Int

    init(count: Int, start: Int? = nil) {
        precondition(count > 0, "a connection needs at least one broker")
        self.count = count
        self.current = (start ?? Int.random(in: 0..<count)) % count
    }

    /// The index of the broker after ``current``.
    var following: Int { (current + 1) % count }

    /// Moves on to the next broker after ``current`` failed.
    mutating func moveOn() {
        current = following
    }
}
