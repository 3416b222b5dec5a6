import APNs
import Glibc
import IOSupport
import Logging
import Synchronization

/// One event-loop thread: owns the connections the acceptor hands it and drives them with `poll`,
/// delayed answers with a timer heap, and a graceful drain at shutdown.
///
/// Each pass: read what poll reported (answers are decided as requests complete), fire due timers,
/// commit the pass's deliveries and counts to ``SandboxState`` (one lock), then write the answers.
final class SandboxWorker: @unchecked Sendable {
    private struct Inbox {
        var sockets: [(fd: Int32, role: ListenerRole)] = []
        /// Set by ``beginDrain(within:)``: milliseconds left for in-flight streams.
        var drainTimeout: UInt64?
    }

    let index: Int
    /// Connections owned, for the acceptor's balancing.
    let connectionCount = Atomic<Int>(0)
    private let inbox = Mutex(Inbox())
    private let wakePipe: WakePipe
    // Everything below is touched only by the worker's thread (after `run()` started).
    private let context: WorkerContext
    private var connections: [UInt64: HTTP2Connection] = [:]
    private var order: [HTTP2Connection] = []
    private var nextConnectionID: UInt64
    private var drainDeadline: UInt64?

    /// Longest poll wait without anything scheduled.
    static let idleWait: Int32 = 1000

    init(index: Int, context: WorkerContext) throws(SandboxError) {
        self.index = index
        self.context = context
        do {
            self.wakePipe = try WakePipe()
        } catch {
            throw SandboxError(.socket, "\(error)")
        }
        nextConnectionID = UInt64(index) << 48
    }

    /// Hands a connected socket, accepted on a listener of `role`, to this worker (from the acceptor thread).
    func adopt(_ socket: Int32, role: ListenerRole) {
        connectionCount.add(1, ordering: .relaxed)
        inbox.withLock { $0.sockets.append((socket, role)) }
        wakePipe.wake()
    }

    /// Starts the graceful drain: GOAWAY on every connection, close each once its streams are
    /// answered, and stop when none is left or `timeout` (ms) passed.
    func beginDrain(within timeout: UInt64) {
        inbox.withLock { inbox in inbox.drainTimeout = min(inbox.drainTimeout ?? .max, timeout) }
        wakePipe.wake()
    }

    /// The thread's body; returns when drained.
    func run() {
        // Runs on an IOThread: SIGPIPE is blocked, so a write to a client that went away is EPIPE.
        var pollSet: [pollfd] = []
        while true {
            context.updateClock()
            context.refreshRules()
            takeInbox()
            if let deadline = drainDeadline {
                if connections.isEmpty { break }
                if context.monotonicMilliseconds >= deadline {
                    context.logger.info(
                        "closing connections still busy at the shutdown deadline", metadata: ["sandbox.connections": "\(connections.count)"])
                    for connection in order { connection.closeNow() }
                    removeClosedConnections()
                    break
                }
            }

            pollSet.removeAll(keepingCapacity: true)
            pollSet.append(pollfd(fd: wakePipe.readEnd, events: Int16(POLLIN), revents: 0))
            for connection in order {
                let events = connection.wantsWritable ? Int16(POLLIN | POLLOUT) : Int16(POLLIN)
                pollSet.append(pollfd(fd: connection.fd, events: events, revents: 0))
            }
            let ready = poll(&pollSet, nfds_t(pollSet.count), pollTimeout())
            if ready < 0, errno != EINTR {
                context.logger.error("poll failed", metadata: ["sandbox.error": "\(SandboxError.posix(.socket, "poll"))"])
            }
            context.updateClock()
            // Faults or token states may have changed while the thread slept: the requests that woke
            // it are answered by the rules in force now.
            context.refreshRules()
            if pollSet[0].revents != 0 { wakePipe.drain() }
            if ready > 0 {
                for (offset, connection) in order.enumerated() {
                    let events = Int32(pollSet[offset + 1].revents)
                    guard events != 0 else { continue }
                    connection.handle(
                        readable: events & Int32(POLLIN) != 0,
                        writable: events & Int32(POLLOUT) != 0,
                        failed: events & Int32(POLLERR | POLLHUP | POLLNVAL) != 0
                    )
                }
            }
            for connection in context.takeServiceQueue() { connection.service() }
            for _ in 0..<Self.timersPerPass {
                guard let due = context.popDueTimer() else { break }
                connections[due.connectionID]?.sendDelayedAnswer(streamID: due.streamID)
            }
            for connection in order {
                if let deadline = connection.lingerDeadline, context.monotonicMilliseconds >= deadline { connection.closeNow() }
            }
            if let idle = context.idleTimeoutMilliseconds {
                for connection in order where connection.isIdle(now: context.monotonicMilliseconds, timeout: idle) {
                    connection.goAway(reason: .idleTimeout)
                }
            }
            context.commitBatch()
            for connection in context.takeFlushQueue() { connection.flush() }
            removeClosedConnections()
        }
        context.commitBatch()
        for connection in order { connection.closeNow() }
        removeClosedConnections()
    }

    /// Timers fired per pass before the loop polls again (the rest fire next pass, without waiting).
    static let timersPerPass = 4096

    private func pollTimeout() -> Int32 {
        if !context.serviceQueue.isEmpty { return 0 }
        let now = context.monotonicMilliseconds
        var wait = UInt64(Self.idleWait)
        if let next = context.timers.nextDeadline { wait = min(wait, next > now ? next - now : 0) }
        if let drainDeadline { wait = min(wait, drainDeadline > now ? drainDeadline - now : 0) }
        for connection in order {
            if let deadline = connection.lingerDeadline { wait = min(wait, deadline > now ? deadline - now : 0) }
        }
        return Int32(wait)
    }

    private func takeInbox() {
        let (sockets, drainTimeout) = inbox.withLock { inbox in
            defer {
                inbox.sockets.removeAll()
                inbox.drainTimeout = nil
            }
            return (inbox.sockets, inbox.drainTimeout)
        }
        for socket in sockets {
            nextConnectionID += 1
            do {
                let connection = try HTTP2Connection(fd: socket.fd, id: nextConnectionID, role: socket.role, worker: context)
                connections[connection.id] = connection
                order.append(connection)
                if drainDeadline != nil { connection.goAway() }
            } catch {
                connectionCount.subtract(1, ordering: .relaxed)
                context.logger.error("cannot take a connection", metadata: ["sandbox.error": "\(error)"])
            }
        }
        if let drainTimeout {
            let deadline = context.monotonicMilliseconds + drainTimeout
            if drainDeadline.map({ deadline < $0 }) ?? true {
                drainDeadline = deadline
                for connection in order { connection.goAway() }
                for connection in context.takeFlushQueue() { connection.flush() }
            }
        }
        removeClosedConnections()
    }

    private func removeClosedConnections() {
        guard order.contains(where: { $0.isClosed }) else { return }
        var kept: [HTTP2Connection] = []
        kept.reserveCapacity(order.count)
        for connection in order {
            if connection.isClosed {
                connections[connection.id] = nil
                connectionCount.subtract(1, ordering: .relaxed)
            } else {
                kept.append(connection)
            }
        }
        order = kept
    }
}
