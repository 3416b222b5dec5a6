/// Sizes push-send's in-flight window (``SendWindow``) from what it measures, by Little's law: the
/// notifications that must be in the air to keep a rate R over a round trip T are R × T.
///
/// Every ``period`` it takes the rate of settled notifications and the shortest APNs round trip
/// (stream opened → answer, so no time spent queueing in the client) over the last
/// ``roundTripPeriods`` periods, and aims for `rate × round trip × headroom`, between ``floor``
/// and ``ceiling``. When the window is what limits the rate (Apple's ~150 ms round trip) the aim is
/// `headroom ×` the window, so it grows, at most doubling per period, until CPU or the ceiling
/// limits the rate; when something else limits it (loopback, CPU-bound) the aim settles at a few
/// hundred, and a `kill -9` repeats at most that many. It shrinks by at most a quarter per period.
///
/// A value: ``settled(holding:)`` and ``endPeriod(elapsed:)`` are pure, so the rules are tested
/// without I/O.
struct WindowSizer: Sendable, Equatable {
    /// How often the size is reconsidered.
    static let period: Duration = .milliseconds(200)
    /// Periods over which the shortest round trip is remembered (2 s).
    static let roundTripPeriods = 10
    /// Room above the measured need, so the window never is what holds a steady rate back.
    static let headroom = 2.0

    let floor: Int
    let ceiling: Int
    private(set) var size: Int
    private var settledInPeriod = 0
    private var shortestInPeriod: Duration?
    /// The shortest hold of each of the last periods that settled anything, newest last.
    private var recentShortest: [Duration] = []

    init(floor: Int, ceiling: Int) {
        self.ceiling = Swift.max(1, ceiling)
        self.floor = Swift.min(Swift.max(1, floor), self.ceiling)
        size = self.floor
    }

    /// One notification settled; `holding` is its APNs round trip (nil: it got no answer).
    mutating func settled(holding: Duration?) {
        settledInPeriod += 1
        if let holding, holding < (shortestInPeriod ?? .seconds(3600)) { shortestInPeriod = holding }
    }

    /// Ends a period that lasted `elapsed`; returns the new size when it changed.
    mutating func endPeriod(elapsed: Duration) -> Int? {
        defer {
            settledInPeriod = 0
            shortestInPeriod = nil
        }
        guard settledInPeriod > 0, let shortest = shortestInPeriod else { return nil }
        recentShortest.append(shortest)
        if recentShortest.count > Self.roundTripPeriods { recentShortest.removeFirst() }
        let roundTrip = Self.seconds(recentShortest.min()!)
        let rate = Double(settledInPeriod) / Swift.max(Self.seconds(elapsed), 0.001)
        let aim = Int((rate * roundTrip * Self.headroom).rounded(.up))
        var next = aim > size ? Swift.min(aim, size * 2) : Swift.max(aim, size - size / 4)
        next = Swift.min(Swift.max(next, floor), ceiling)
        guard next != size else { return nil }
        size = next
        return next
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
