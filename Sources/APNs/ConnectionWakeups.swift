import IOSupport
import Synchronization

/// How a connection's I/O thread is woken when work arrives: a self-pipe it polls, plus what it
/// published about itself before sleeping (asleep? room for more streams?), so a caller wakes one
/// connection that can take the work instead of writing to every pipe for every request.
final class WakeSlot: Sendable {
    private let pipe: WakePipe
    /// Set by the thread right before it polls, cleared by whoever wakes it (or by itself).
    let sleeping = Atomic<Bool>(false)
    /// Streams the connection could still open (a disconnected connection counts 1: it connects).
    let freeStreams = Atomic<Int>(1)
    /// Set once by shutdown.
    let stopping = Atomic<Bool>(false)
    /// The connection has an HTTP/2 session up.
    let isOpen = Atomic<Bool>(false)

    init() throws(APNsClientError) {
        do {
            pipe = try WakePipe()
        } catch {
            throw APNsClientError(.protocolError, "\(error)")
        }
    }

    /// The descriptor the thread polls.
    var descriptor: Int32 { pipe.readEnd }

    /// Makes the pipe readable.
    func wake() { pipe.wake() }

    /// Empties the pipe after a wake-up.
    func drain() { pipe.drain() }
}

/// The client's connections' slots. Work goes to an open connection with room, round robin; another
/// connection opens only when work has waited ``ClientConnection/growthWait`` while every open one
/// carried all the streams the server allows (``openAnother()``), so a loopback server is served by
/// one connection and Apple's round trip by as many as its load needs.
final class ConnectionWakeups: Sendable {
    let slots: [WakeSlot]
    private let next = Atomic<Int>(0)
    /// Connections in the middle of connecting.
    let connecting = Atomic<Int>(0)

    init(count: Int) throws(APNsClientError) {
        var slots: [WakeSlot] = []
        for _ in 0..<count { slots.append(try WakeSlot()) }
        self.slots = slots
    }

    /// Wakes one open connection with room if it sleeps (an awake one picks the work up on its next
    /// pass). With no connection open or opening, wakes a closed one to connect.
    ///
    /// Sequentially consistent, as is the connection's side: it marks itself asleep and then reads
    /// the queue's count (without a lock); a sender queues and then reads the mark here. Only with
    /// all four in one order can neither miss the other.
    func wakeOne() {
        let count = slots.count
        let start = next.add(1, ordering: .relaxed).oldValue
        var anyOpen = false
        for offset in 0..<count {
            let slot = slots[(start &+ offset) % count]
            guard slot.isOpen.load(ordering: .acquiring) else { continue }
            anyOpen = true
            guard slot.freeStreams.load(ordering: .relaxed) > 0 else { continue }
            if slot.sleeping.exchange(false, ordering: .sequentiallyConsistent) { slot.wake() }
            return
        }
        if !anyOpen { openAnother() }
    }

    /// Wakes a closed connection to connect, unless one is connecting already.
    func openAnother() {
        guard connecting.load(ordering: .acquiring) == 0 else { return }
        for slot in slots where !slot.isOpen.load(ordering: .acquiring) {
            if slot.sleeping.exchange(false, ordering: .sequentiallyConsistent) {
                slot.wake()
                return
            }
        }
    }

    /// Wakes every connection (shutdown, or many requeued requests).
    func wakeAll() {
        for slot in slots {
            slot.sleeping.store(false, ordering: .releasing)
            slot.wake()
        }
    }
}
