import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

@testable import PushServiceKit

/// The consumer loop over an in-memory source: the bound on workers, batches, settling in order,
/// graceful shutdown and the drain deadline. No broker needed.
@Suite(.timeLimit(.minutes(1)))
struct BoundedConsumerTests {
    @Test func noMoreThanTheWorkersRunAtOnceAndEveryElementIsWorkedOn() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        for value in 0..<40 { continuation.yield(value) }
        continuation.finish()
        let load = Load()
        let loop = BoundedConsumer(name: "test consumer", bounds: .init(workers: 3), logger: boundedConsumerTestLogger)
        try await loop.run(source, ordered: false, stopTaking: {}) { elements, _ in
            #expect(elements.count == 1)
            load.start(elements)
            try? await Task.sleep(for: .milliseconds(5))
            load.finish()
        }
        #expect(load.peak == 3)
        #expect(load.seen.sorted() == Array(0..<40))
    }

    @Test func batchesTakeWhatHasArrivedUpToTheBatchSizeAndSettleInTheOrderTaken() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let load = Load()
        let settled = Mutex<[[Int]]>([])
        let loop = BoundedConsumer(name: "test consumer", bounds: .init(workers: 4, batchSize: 5), logger: boundedConsumerTestLogger)
        let running = Task {
            try await loop.run(source, ordered: true, stopTaking: {}) { elements, turn in
                load.start(elements)
                // Later batches finish their work first...
                try? await Task.sleep(for: .milliseconds(Int.random(in: 0...20)))
                await turn.waitForEarlierBatches()
                // ...but settle after every earlier one.
                settled.withLock { $0.append(elements) }
                load.finish()
            }
        }
        for value in 0..<60 {
            continuation.yield(value)
            if value % 7 == 0 { try await Task.sleep(for: .milliseconds(2)) }
        }
        continuation.finish()
        try await running.value
        let batches = settled.withLock { $0 }
        #expect(batches.allSatisfy { !$0.isEmpty && $0.count <= 5 })
        #expect(batches.flatMap { $0 } == Array(0..<60), "settled in the order received")
        #expect(load.peak <= 4)
    }

    @Test func unorderedWorkDoesNotWaitForEarlierWork() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        continuation.yield(1)
        continuation.yield(2)
        continuation.finish()
        let order = Mutex<[Int]>([])
        let loop = BoundedConsumer(name: "test consumer", bounds: .init(workers: 2), logger: boundedConsumerTestLogger)
        try await loop.run(source, ordered: false, stopTaking: {}) { elements, turn in
            if elements == [1] { try? await Task.sleep(for: .milliseconds(200)) }
            await turn.waitForEarlierBatches()
            order.withLock { $0.append(contentsOf: elements) }
        }
        #expect(order.withLock { $0 } == [2, 1])
    }

    @Test func gracefulShutdownStopsTakingAndLetsTheWorkInFlightFinish() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let started = Load()
        let finished = Mutex<[Int]>([])
        // What had finished when the loop stopped taking; nil until it has.
        let finishedAtStop = Mutex<[Int]?>(nil)
        // 1 and 2 are held until the test lets them go: the work in flight at shutdown.
        let gates = Gates([1, 2])
        let loop = BoundedConsumer(name: "test consumer", bounds: .init(workers: 2), logger: boundedConsumerTestLogger)
        let service = LoopService {
            try await loop.run(
                source, ordered: false,
                stopTaking: {
                    finishedAtStop.withLock { $0 = finished.withLock { $0 } }
                    continuation.finish()
                }
            ) { elements, _ in
                started.start(elements)
                for element in elements { await gates.wait(for: element) }
                finished.withLock { $0.append(contentsOf: elements) }
            }
        }
        try await withRunningServices([service], logger: boundedConsumerTestLogger) { group in
            continuation.yield(1)
            continuation.yield(2)
            try await eventually("both elements started", timeout: .seconds(5), poll: .milliseconds(5)) { started.seen.count == 2 }
            await group.triggerGracefulShutdown()
            // The shutdown reaches the loop on another task; 1 and 2 are still held, so a loop that
            // only stops taking once its work is done (or never) has not stopped when this gives up.
            // Giving up is not the failure itself: the test goes on, and such a loop is caught below
            // taking element 3.
            try? await eventually("the loop stops taking", timeout: .seconds(10), poll: .milliseconds(5)) {
                finishedAtStop.withLock { $0 } != nil
            }
            // 3 arrives after the shutdown, while the loop still runs (2 is in flight) and has a free
            // worker (1 is done): a loop still taking would start it now.
            continuation.yield(3)
            gates.open(1)
            try await eventually("1 finished", timeout: .seconds(5), poll: .milliseconds(5)) { finished.withLock { $0 }.contains(1) }
            gates.open(2)
        }
        // The loop has returned: whatever it took was started before that.
        #expect(finishedAtStop.withLock { $0 } == [], "stopped taking at shutdown, with 1 and 2 still in flight")
        #expect(finished.withLock { $0.sorted() } == [1, 2], "not cancelled: there is no drain deadline")
        #expect(started.seen.sorted() == [1, 2], "nothing taken after shutdown")
    }

    @Test func atTheDrainDeadlineTheWorkInFlightIsCancelled() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let started = Load()
        let cancelled = Mutex<[Int]>([])
        let loop = BoundedConsumer(
            name: "test consumer", bounds: .init(workers: 4, drainDeadline: .milliseconds(200)), logger: boundedConsumerTestLogger)
        let service = LoopService {
            try await loop.run(source, ordered: false, stopTaking: { continuation.finish() }) { elements, _ in
                started.start(elements)
                // Quick work finishes within the deadline; slow work only ends when cancelled.
                try? await Task.sleep(for: elements == [1] ? .milliseconds(10) : .seconds(30))
                if Task.isCancelled { cancelled.withLock { $0.append(contentsOf: elements) } }
            }
        }
        let clock = ContinuousClock()
        let shutdownAt = Mutex(clock.now)
        try await withRunningServices([service], logger: boundedConsumerTestLogger) { group in
            continuation.yield(1)
            continuation.yield(2)
            continuation.yield(3)
            try await eventually("all three elements started", timeout: .seconds(5), poll: .milliseconds(5)) { started.seen.count == 3 }
            shutdownAt.withLock { $0 = clock.now }
            await group.triggerGracefulShutdown()
        }
        let took = clock.now - shutdownAt.withLock { $0 }
        #expect(cancelled.withLock { $0.sorted() } == [2, 3])
        #expect(took >= .milliseconds(200) && took < .seconds(10), "returned \(took) after shutdown")
    }

    @Test func aFailingSourceEndsTheLoopAfterTheWorkInFlightAndThrows() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        let finished = Mutex<[Int]>([])
        let loop = BoundedConsumer(name: "test consumer", bounds: .init(workers: 2), logger: boundedConsumerTestLogger)
        continuation.yield(1)
        continuation.finish(throwing: SourceFailure())
        await #expect(throws: SourceFailure.self) {
            try await loop.run(source, ordered: false, stopTaking: {}) { elements, _ in
                try? await Task.sleep(for: .milliseconds(100))
                finished.withLock { $0.append(contentsOf: elements) }
            }
        }
        #expect(finished.withLock { $0 } == [1])
    }

    @Test func boundsAreAtLeastOne() {
        let bounds = BoundedConsumer.Bounds(workers: 0, batchSize: -3)
        #expect(bounds.workers == 1 && bounds.batchSize == 1 && bounds.drainDeadline == nil)
    }

    @Test func theInboxHandsOverWhatIsReadyUpToTheBatchSize() async {
        let inbox = DeliveryInbox<Int>()
        for value in 1...5 { inbox.put(value) }
        #expect(await inbox.take(max: 3) == [1, 2, 3])
        #expect(await inbox.take(max: 3) == [4, 5])
        let waiting = Task { await inbox.take(max: 3) }
        try? await Task.sleep(for: .milliseconds(50))
        inbox.put(6)
        #expect(await waiting.value == [6])
        inbox.put(7)
        inbox.finish()
        #expect(await inbox.take(max: 3) == [7])
        #expect(await inbox.take(max: 3) == nil)
    }
}

// MARK: - Support

private let boundedConsumerTestLogger = TestLogger.make("bounded-consumer-tests")

private struct SourceFailure: Error {}

/// Work started and running now, and the most that ran at once.
extension BoundedConsumerTests {
    @Test func anElementToWorkOnAloneRunsWithNothingElseInFlightAndEverythingGuardedIsMarked() async throws {
        let (source, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
        for value in 0..<30 { continuation.yield(value) }
        continuation.finish()
        // Running work, and what ran while each alone element was in flight.
        let running = Mutex<Set<Int>>([])
        let besideAlone = Mutex<[Int: Set<Int>]>([:])
        let guarded = Mutex<[(elements: [Int], alone: Bool)]>([])
        let settledByLane = Mutex<[Int]>([])
        let lanes = ConsumerLanes<Int>(
            lane: { value in
                if value % 10 == 7 { return .alone }
                if value == 12 {
                    settledByLane.withLock { $0.append(value) }
                    return .settled
                }
                return .together
            },
            guarding: { elements, alone, work in
                guarded.withLock { $0.append((elements, alone)) }
                await work()
            })
        let loop = BoundedConsumer(name: "test consumer", bounds: .init(workers: 4, batchSize: 3), logger: boundedConsumerTestLogger)
        try await loop.run(source, ordered: true, lanes: lanes, stopTaking: {}) { elements, turn in
            running.withLock { $0.formUnion(elements) }
            if elements.contains(where: { $0 % 10 == 7 }) {
                try? await Task.sleep(for: .milliseconds(20))
                let others = running.withLock { $0.subtracting(elements) }
                besideAlone.withLock { $0[elements[0]] = others }
            } else {
                try? await Task.sleep(for: .milliseconds(Int.random(in: 1...10)))
            }
            await turn.waitForEarlierBatches()
            running.withLock { $0.subtract(elements) }
        }
        let alone = besideAlone.withLock { $0 }
        #expect(alone.keys.sorted() == [7, 17, 27])
        for (value, others) in alone { #expect(others.isEmpty, "\(others.sorted()) ran beside \(value)") }
        let batches = guarded.withLock { $0 }
        #expect(batches.filter(\.alone).map(\.elements) == [[7], [17], [27]])
        #expect(batches.allSatisfy { $0.alone == ($0.elements.count == 1 && $0.elements[0] % 10 == 7) })
        #expect(batches.flatMap(\.elements).sorted() == (0..<30).filter { $0 != 12 }, "every element worked on once, none settled by its lane")
        #expect(settledByLane.withLock { $0 } == [12])
    }
}

private final class Load: Sendable {
    private let state = Mutex<(running: Int, peak: Int, seen: [Int])>((0, 0, []))

    func start(_ elements: [Int]) {
        state.withLock { state in
            state.running += 1
            state.peak = max(state.peak, state.running)
            state.seen.append(contentsOf: elements)
        }
    }

    func finish() { state.withLock { $0.running -= 1 } }
    var peak: Int { state.withLock { $0.peak } }
    var seen: [Int] { state.withLock { $0.seen } }
}

/// Work that waits until the test opens its element's gate; elements without a gate run through.
private final class Gates: Sendable {
    private let gates: [Int: (stream: AsyncStream<Never>, continuation: AsyncStream<Never>.Continuation)]

    init(_ elements: [Int]) {
        gates = Dictionary(uniqueKeysWithValues: elements.map { ($0, AsyncStream<Never>.makeStream()) })
    }

    func wait(for element: Int) async {
        guard let gate = gates[element] else { return }
        for await _ in gate.stream {}
    }

    func open(_ element: Int) { gates[element]?.continuation.finish() }
}

private struct LoopService: Service {
    let body: @Sendable () async throws -> Void
    init(_ body: @escaping @Sendable () async throws -> Void) { self.body = body }
    func run() async throws { try await body() }
}
