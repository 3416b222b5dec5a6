import Foundation
import IOSupport
import Synchronization

/// The state shared between an ``AMQPConnection``'s callers and its I/O thread: a command queue,
/// the connection status, and a pipe that wakes the thread from `poll` when a command arrives.
final class ConnectionCore: Sendable {
    enum Phase: Sendable {
        case idle
        case running
        case closed
    }

    private struct State {
        var phase: Phase = .idle
        var commands: [Command] = []
        var sleeping = false
        var connected = false
        var lastError: AMQPError?
        /// The broker of the cluster the connection uses now, or used last.
        var broker: AMQPBroker?
        /// The broker's reason while it blocks this connection (`connection.blocked`).
        var blocked: String?
        var nextConsumerID: UInt64 = 1
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let wakeup: WakePipe

    init() {
        do {
            wakeup = try WakePipe()
        } catch {
            // Out of descriptors at start: nothing sensible can run without the wake-up pipe.
            preconditionFailure("\(error)")
        }
    }

    // MARK: Callers' side

    func claimStart() -> Bool {
        state.withLock { state in
            guard state.phase == .idle else { return false }
            state.phase = .running
            return true
        }
    }

    var hasStarted: Bool { state.withLock { $0.phase != .idle } }
    var isClosed: Bool { state.withLock { $0.phase == .closed } }
    var isConnected: Bool { state.withLock { $0.connected } }
    var lastError: AMQPError? { state.withLock { $0.lastError } }
    var blockedReason: String? { state.withLock { $0.blocked } }
    var broker: AMQPBroker? { state.withLock { $0.broker } }

    func nextConsumerID() -> UInt64 {
        state.withLock { state in
            defer { state.nextConsumerID += 1 }
            return state.nextConsumerID
        }
    }

    /// Queues a command for the I/O thread; false once the connection has closed.
    func enqueue(_ command: Command) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard state.phase != .closed else { return (false, false) }
            state.commands.append(command)
            guard state.sleeping else { return (true, false) }
            state.sleeping = false
            return (true, true)
        }
        if wake {
            wakeup.wake()
        }
        return accepted
    }

    func waitForExit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                guard state.phase != .closed else { return true }
                state.exitWaiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    // MARK: I/O thread's side

    func takeCommands() -> [Command] {
        state.withLock { state in
            defer { state.commands.removeAll(keepingCapacity: true) }
            return state.commands
        }
    }

    /// The generation of the session up now (0: none). Deliveries of another generation can no
    /// longer be settled: the broker requeued them when their session ended.
    let liveGeneration = Atomic<UInt64>(0)

    /// Consumer channels of the live session that the broker closed: their deliveries went back to
    /// the queue and can no longer be settled (the channel is not reused within the session).
    private let deadChannels = Mutex<Set<UInt16>>([])

    /// Whether a delivery of session `generation` on `channel` can still be settled.
    func isSettleable(generation: UInt64, channel: UInt16) -> Bool {
        liveGeneration.load(ordering: .acquiring) == generation && !deadChannels.withLock { $0.contains(channel) }
    }

    func channelDied(_ channel: UInt16) {
        deadChannels.withLock { _ = $0.insert(channel) }
    }

    func setConnected(generation: UInt64) {
        deadChannels.withLock { $0.removeAll() }
        state.withLock { $0.connected = true }
        liveGeneration.store(generation, ordering: .releasing)
    }

    func setBroker(_ broker: AMQPBroker) {
        state.withLock { $0.broker = broker }
    }

    func setDisconnected(_ error: AMQPError) {
        liveGeneration.store(0, ordering: .releasing)
        state.withLock {
            $0.connected = false
            $0.lastError = error
            $0.blocked = nil
        }
    }

    /// Records `connection.blocked` (a reason) or `connection.unblocked` (nil); true if it changed.
    func setBlocked(_ reason: String?) -> Bool {
        state.withLock { state in
            guard state.blocked != reason else { return false }
            state.blocked = reason
            return true
        }
    }

    /// Waits until `descriptor` is readable, a command arrives, or `timeout` passes.
    func wait(for descriptor: Int32?, timeout: Duration) {
        let mayWait = state.withLock { state -> Bool in
            guard state.commands.isEmpty else { return false }
            state.sleeping = true
            return true
        }
        guard mayWait else { return }
        var descriptors = [pollfd(fd: wakeup.readEnd, events: Int16(POLLIN), revents: 0)]
        if let descriptor { descriptors.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)) }
        // Rounded up, so a sub-millisecond remainder sleeps 1 ms instead of spinning.
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        _ = poll(&descriptors, nfds_t(descriptors.count), max(milliseconds, 0))
        state.withLock { $0.sleeping = false }
        if descriptors[0].revents != 0 {
            wakeup.drain()
        }
    }

    /// Marks the connection closed and returns commands that arrived too late to run.
    func markClosed() -> [Command] {
        let (leftovers, waiters) = state.withLock { state in
            state.phase = .closed
            state.connected = false
            defer {
                state.commands.removeAll()
                state.exitWaiters.removeAll()
            }
            return (state.commands, state.exitWaiters)
        }
        for waiter in waiters { waiter.resume() }
        return leftovers
    }
}

/// Work for the I/O thread.
enum Command: Sendable {
    case publish([PendingPublish])
    case settle(Settlement, generation: UInt64, channel: UInt16, tag: UInt64, multiple: Bool)
    case consume(ConsumerSpec)
    case cancel(consumer: UInt64)
    case admin(AdminCommand)
    case close
}

enum Settlement: Sendable {
    case ack
    case nackRequeue
    case nackDrop
    case rejectRequeue
    case rejectDrop
}

/// A publish waiting to be sent or confirmed; `complete` is called exactly once, on the I/O thread.
/// `deadline` bounds both: not sent or not confirmed by then, it fails (``AMQPError/Code/timeout``).
struct PendingPublish: Sendable, Expiring {
    let message: AMQPOutboundMessage
    let deadline: ContinuousClock.Instant
    let complete: @Sendable (Result<Void, AMQPError>) -> Void
}

struct ConsumerSpec: Sendable {
    let id: UInt64
    let queue: String
    let prefetch: UInt16
    let arguments: AMQPTable
    let continuation: AsyncThrowingStream<AMQPDelivery, any Error>.Continuation
}

/// A synchronous broker call run on the I/O thread's admin channel. `run` returns the error it
/// reported (so the thread can reopen a channel the broker closed); `fail` reports a call that
/// could not run at all.
struct AdminCommand: Sendable {
    let run: @Sendable (RabbitSession, UInt16) -> AMQPError?
    let fail: @Sendable (AMQPError) -> Void
}
