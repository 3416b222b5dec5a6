/// Sizes push-send's in-flight window (``SendWindow``) from what it measures, by Little's law: the
/// notifications that must be in the air to keep a rate R over a round trip T are R × T.
///
/// Every ``period`` it takes the rate of settled notifications and the shortest APNs round trip
/// (stream opened → answer, so no time spent queueing in the client) over the last
/// ``roundTripPeriods`` periods (20 s), and aims for `rate × round trip × headroom`, between ``floor``
/// and ``ceiling``. When the window is what limits the rate (Apple's ~150 ms round trip) the aim is
/// `headroom ×` the window, so it grows, at most doubling per period, until CPU or the ceiling
/// limits the rate; when something else limits it (loopback, CPU-bound) the aim settles at a few
/// hundred, and a `kill -9` repeats at most that many. It shrinks by at most a quarter per period.
///
/// **The server's own queue.** A round trip is measured from the stream's opening, but when the
/// server is what limits the rate (a starved apns-sandbox, APNs throttling) whatever is in flight
/// beyond its rate × latency waits in *its* queue, and the round trip grows with the window:
/// `rate × round trip` is then the window itself, the aim twice that, and the window doubled to the
/// ceiling and stayed there (measured: a 1,000,000-token broadcast at 11,900/s instead of 28,000/s,
/// push-send on a whole core over 18 connections). So the shortest round trip must be seen again:
/// a period whose shortest answer is within ``confirmTolerance`` of it confirms it; when none has
/// for ``confirmPeriods`` periods (20 s), the window goes to the floor until the queue it built has
/// drained (``probeDuration(after:)``), and the shortest answer seen then is the round trip. At
/// Apple's 150 ms, with push-send the limit, every period confirms it and this never happens.
///
/// A value: ``settled(holding:)`` and ``endPeriod(elapsed:)`` are pure, so the rules are tested
/// without I/O.
struct WindowSizer: Sendable, Equatable {
    /// How often the size is reconsidered.
    static let period: Duration = .milliseconds(200)
    /// Periods over which the shortest round trip is remembered (20 s): as long as a probe may take
    /// to come, so a window that builds a queue cannot raise its own round trip in between.
    static let roundTripPeriods = confirmPeriods
    /// Room above the measured need, so the window never is what holds a steady rate back.
    static let headroom = 2.0
    /// A period whose shortest answer is at most this many times the remembered round trip confirms
    /// it: wide enough for a busy server's jitter (a probe costs throughput), narrow enough for a
    /// window that builds a queue, which doubles the round trip with each doubling of its size.
    static let confirmTolerance = 1.5
    /// Periods without a confirmation before the window is probed at the floor (20 s).
    static let confirmPeriods = 100
    /// The longest probe (2 s): a queue that takes longer to drain at the floor is not the server's.
    static let maximumProbePeriods = 10

    let floor: Int
    let ceiling: Int
    private(set) var size: Int
    private var settledInPeriod = 0
    private var shortestInPeriod: Duration?
    /// The shortest hold of each of the last periods that settled anything, newest last.
    private var recentShortest: [Duration] = []
    /// Periods since the round trip was last confirmed, and the shortest answer of those periods.
    private var unconfirmedPeriods = 0
    private var unconfirmedShortest: Duration?
    /// While probing: the periods left, the rate before the probe, and the shortest answer seen.
    private var probe: (periodsLeft: Int, rate: Double, shortest: Duration?)?

    /// Whether the window is held at the floor to see the round trip without the server's queue.
    var isProbing: Bool { probe != nil }

    static func == (lhs: WindowSizer, rhs: WindowSizer) -> Bool {
        lhs.floor == rhs.floor && lhs.ceiling == rhs.ceiling && lhs.size == rhs.size && lhs.settledInPeriod == rhs.settledInPeriod
            && lhs.shortestInPeriod == rhs.shortestInPeriod && lhs.recentShortest == rhs.recentShortest
            && lhs.unconfirmedPeriods == rhs.unconfirmedPeriods && lhs.unconfirmedShortest == rhs.unconfirmedShortest
            && lhs.probe?.periodsLeft == rhs.probe?.periodsLeft
            && lhs.probe?.rate == rhs.probe?.rate && lhs.probe?.shortest == rhs.probe?.shortest
    }

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
        if var running = probe {
            if let shortest = shortestInPeriod, shortest < (running.shortest ?? .seconds(3600)) { running.shortest = shortest }
            running.periodsLeft -= 1
            guard running.periodsLeft <= 0 else {
                probe = running
                return nil
            }
            // The probe is over: what it saw is the round trip; the rate is the one before it.
            probe = nil
            unconfirmedPeriods = 0
            unconfirmedShortest = nil
            if let shortest = running.shortest { recentShortest = [shortest] }
            return resize(rate: running.rate, grow: .infinity)
        }
        guard settledInPeriod > 0, let shortest = shortestInPeriod else { return nil }
        let remembered = recentShortest.min()
        if let remembered, Self.seconds(shortest) > Self.seconds(remembered) * Self.confirmTolerance {
            unconfirmedPeriods += 1
            unconfirmedShortest = Swift.min(unconfirmedShortest ?? shortest, shortest)
        } else {
            unconfirmedPeriods = 0
            unconfirmedShortest = nil
        }
        recentShortest.append(shortest)
        if recentShortest.count > Self.roundTripPeriods { recentShortest.removeFirst() }
        let rate = Double(settledInPeriod) / Swift.max(Self.seconds(elapsed), 0.001)
        if unconfirmedPeriods >= Self.confirmPeriods {
            unconfirmedPeriods = 0
            if size > floor {
                probe = (Self.probeDuration(after: shortest), rate, nil)
                unconfirmedShortest = nil
                size = floor
                return floor
            }
            // Already at the floor: no queue of the window's making, so the round trip really grew.
            recentShortest = unconfirmedShortest.map { [$0] } ?? recentShortest
            unconfirmedShortest = nil
        }
        return resize(rate: rate, grow: 2)
    }

    /// Periods to hold the floor so that what was in flight before has been answered: the queue it
    /// built drains within the round trip seen last, plus a period for the floor's own answers.
    static func probeDuration(after roundTrip: Duration) -> Int {
        let periods = Int((seconds(roundTrip) / seconds(period)).rounded(.up)) + 1
        return Swift.min(Swift.max(periods, 2), maximumProbePeriods)
    }

    /// Aims at `rate × round trip × headroom`, growing at most `grow` times per period and shrinking by
    /// at most a quarter; returns the new size when it changed.
    private mutating func resize(rate: Double, grow: Double) -> Int? {
        guard let roundTrip = recentShortest.min().map(Self.seconds) else { return nil }
        let aim = Int((rate * roundTrip * Self.headroom).rounded(.up))
        let growth = grow.isInfinite ? Double(ceiling) : Double(size) * grow
        var next = aim > size ? Swift.min(aim, Int(Swift.min(growth, Double(Int.max / 2)))) : Swift.max(aim, size - size / 4)
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
