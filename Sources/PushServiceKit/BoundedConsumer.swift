public import AMQP
public import Logging
import ServiceLifecycle

/// The loop every queue consumer runs: takes deliveries, hands them to at most ``Bounds/workers``
/// workers at a time, and on graceful shutdown stops taking, drains the work in flight (cancelling
/// what is still running at the drain deadline, if there is one) and returns.
///
/// In-flight work is bounded twice: by the workers here, and by the broker's prefetch, which callers
/// set to the deliveries all workers hold together so the bound holds across reconnects too. A reader
/// task moves deliveries from the consumer into a ``DeliveryInbox``; the loop takes whatever has
/// arrived, up to ``Bounds/batchSize`` (1: each delivery alone), and waits for a free worker.
///
/// The consumer's own work only decides what to do with a delivery and settles it through
/// ``DeliverySettler``; it must settle every delivery exactly once and never throw.
///
/// With a ``CrashGuard`` every delivery is marked in progress while worked on, and a redelivered
/// suspect of an earlier crash is worked on alone: the loop waits for the work in flight, runs it,
/// and waits for it before taking anything else (``ConsumerLanes``).
public struct BoundedConsumer: Sendable {
    public struct Bounds: Sendable, Equatable {
        /// Deliveries (or batches) worked on at once; at least 1.
        public var workers: Int
        /// Deliveries handed to one worker at once; at least 1.
        public var batchSize: Int
        /// After shutdown, once every delivery taken has been started: how long the work in flight may
        /// still take before it is cancelled (it then returns its deliveries to the queue). Nil waits
        /// for all of it.
        public var drainDeadline: Duration?

        public init(workers: Int, batchSize: Int = 1, drainDeadline: Duration? = nil) {
            self.workers = Swift.max(1, workers)
            self.batchSize = Swift.max(1, batchSize)
            self.drainDeadline = drainDeadline
        }
    }

    /// For log lines: `registration consumer` logs `registration consumer drained`.
    public let name: String
    public let bounds: Bounds
    public let logger: Logger
    /// Marks deliveries in progress and finds the one that crashes the service; nil runs unguarded.
    public let crashGuard: CrashGuard?

    public init(name: String, bounds: Bounds, logger: Logger, crashGuard: CrashGuard? = nil) {
        self.name = name
        self.bounds = bounds
        self.logger = logger
        self.crashGuard = crashGuard
    }

    /// Consumes until graceful shutdown or cancellation, handing each delivery to `process` on its own.
    ///
    /// - Parameter onShutdown: runs at graceful shutdown, before the consumer is cancelled (e.g. to
    ///   tell long work to stop at its next safe point).
    /// - Throws: when the broker cancels the consumer (the queue was deleted), after draining.
    public func run(
        _ consumer: AMQPConsumer,
        onShutdown: @escaping @Sendable () -> Void = {},
        process: @escaping @Sendable (AMQPDelivery) async -> Void
    ) async throws {
        try await run(
            MessageAgeGauge.observing(consumer), ordered: false, lanes: crashGuard?.lanes,
            stopTaking: {
                onShutdown()
                consumer.cancel()
            }
        ) { deliveries, _ in
            for delivery in deliveries { await process(delivery) }
        }
    }

    /// Consumes until graceful shutdown or cancellation, handing whatever has arrived (up to the batch
    /// size) to `process` with the batch's ``SettlementTurn``: batches are worked on concurrently but
    /// can settle in the order they were taken.
    ///
    /// - Throws: when the broker cancels the consumer (the queue was deleted), after draining.
    public func run(
        _ consumer: AMQPConsumer,
        onShutdown: @escaping @Sendable () -> Void = {},
        processBatch: @escaping @Sendable ([AMQPDelivery], SettlementTurn) async -> Void
    ) async throws {
        try await run(
            MessageAgeGauge.observing(consumer), ordered: true, lanes: crashGuard?.lanes,
            stopTaking: {
                onShutdown()
                consumer.cancel()
            }, work: processBatch)
    }

    private enum Finished: Sendable {
        case reader
        case work
        case drainDeadline
    }

    /// The loop, over any source. `stopTaking` runs at graceful shutdown and must end `source`.
    /// `lanes` (nil: every element together, unmarked) decides which elements are worked on alone.
    func run<Source: AsyncSequence & Sendable>(
        _ source: Source,
        ordered: Bool,
        lanes: ConsumerLanes<Source.Element>? = nil,
        stopTaking: @escaping @Sendable () -> Void,
        work: @escaping @Sendable ([Source.Element], SettlementTurn) async -> Void
    ) async throws where Source.Element: Sendable {
        let inbox = DeliveryInbox<Source.Element>()
        let bounds = self.bounds
        let logger = self.logger
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Finished.self) { group in
                group.addTask {
                    do {
                        for try await element in source { inbox.put(element) }
                        inbox.finish()
                    } catch {
                        inbox.finish(failure: error)
                    }
                    return .reader
                }
                var inFlight = 0
                var previous: OneShotGate?
                /// Starts `elements` on a worker once one is free.
                func start(_ elements: [Source.Element], alone: Bool) async {
                    while inFlight >= (alone ? 1 : bounds.workers), let finished = await group.next() {
                        if finished == .work { inFlight -= 1 }
                    }
                    let turn = SettlementTurn(after: ordered ? previous : nil)
                    previous = turn.own
                    group.addTask {
                        if let lanes {
                            await lanes.guarding(elements, alone) { await work(elements, turn) }
                        } else {
                            await work(elements, turn)
                        }
                        turn.own.open()
                        return .work
                    }
                    inFlight += 1
                }
                while let elements = await inbox.take(max: bounds.batchSize) {
                    guard let lanes else {
                        await start(elements, alone: false)
                        continue
                    }
                    // In taking order: a run of elements that go together is one batch; an element to
                    // work on alone waits for every worker, runs, and is waited for (so a batch's
                    // `multiple` ack never covers a delivery that is still to be worked on).
                    var together: [Source.Element] = []
                    for element in elements {
                        switch await lanes.lane(element) {
                        case .together:
                            together.append(element)
                        case .alone:
                            if !together.isEmpty { await start(together, alone: false) }
                            together = []
                            await start([element], alone: true)
                            while inFlight > 0, let finished = await group.next() {
                                if finished == .work { inFlight -= 1 }
                            }
                        case .settled:
                            break
                        }
                    }
                    if !together.isEmpty { await start(together, alone: false) }
                }
                guard inFlight > 0, let deadline = bounds.drainDeadline else {
                    await group.waitForAll()
                    return
                }
                logger.info("draining the work in flight", metadata: ["push.in_flight": "\(inFlight)", "push.drain_deadline": "\(deadline)"])
                group.addTask {
                    try? await Task.sleep(for: deadline)
                    return .drainDeadline
                }
                while inFlight > 0, let finished = await group.next() {
                    switch finished {
                    case .work:
                        inFlight -= 1
                    case .drainDeadline:
                        logger.warning(
                            "drain deadline passed: cancelling the work in flight, which returns it to the queue",
                            metadata: ["push.in_flight": "\(inFlight)"])
                        group.cancelAll()
                    case .reader:
                        break
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            stopTaking()
        }
        if let failure = inbox.failure {
            logger.error("\(name) stopped", metadata: ["push.error": "\(failure)"])
            throw failure
        }
        logger.info("\(name) drained")
    }
}

/// Where ``BoundedConsumer`` works on one element.
public enum ConsumerLane: Sendable, Equatable {
    /// With the others, up to the workers and the batch size.
    case together
    /// With nothing else in flight in this process.
    case alone
    /// Already settled (e.g. dead-lettered): nothing to work on.
    case settled
}

/// How ``BoundedConsumer`` places elements (``CrashGuard/lanes``): `lane` picks each element's lane as
/// it is taken; `guarding` wraps the work on a batch (alone or not), e.g. to mark it in progress.
public struct ConsumerLanes<Element: Sendable>: Sendable {
    public let lane: @Sendable (Element) async -> ConsumerLane
    public let guarding: @Sendable (_ elements: [Element], _ alone: Bool, _ work: @Sendable () async -> Void) async -> Void

    public init(
        lane: @escaping @Sendable (Element) async -> ConsumerLane,
        guarding: @escaping @Sendable (_ elements: [Element], _ alone: Bool, _ work: @Sendable () async -> Void) async -> Void
    ) {
        self.lane = lane
        self.guarding = guarding
    }
}
