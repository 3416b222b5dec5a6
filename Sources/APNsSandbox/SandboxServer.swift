import Foundation
import Glibc
import HTTP2Transport
import IOSupport
import Logging
import ServiceLifecycle
import Synchronization

/// The APNs-compatible HTTP/2 server: TLS (ALPN `h2`) on `127.0.0.1:port`, an accept thread and
/// ``SandboxConfiguration/workerThreads`` event-loop threads, each owning its connections.
///
/// Creating it binds the port (so ``port`` is known and "address in use" fails early) and, for a
/// generated identity, writes the CA file. ``run()`` serves until graceful shutdown (SIGTERM through
/// the `ServiceGroup`, or ``shutdown()``): it stops accepting, sends GOAWAY on every connection,
/// answers the streams in flight and returns once all connections closed (or after
/// ``SandboxConfiguration/shutdownTimeout``). Cancelling `run()` closes everything at once.
public final class SandboxServer: Service, Sendable, CustomStringConvertible {
    /// The port the server listens on.
    public let port: Int
    /// The address it listens on.
    public let host: String
    /// The channel-management port, when it has its own (``SandboxConfiguration/managementPort``).
    public let managementPort: Int?
    private let listener: ListeningSocket
    private let managementListener: ListeningSocket?
    private let acceptorWake: WakePipe
    private let workers: [SandboxWorker]
    private let shutdownTimeout: Duration
    private let logger: Logger
    private let lifecycle = Mutex(Lifecycle())
    private let stopAccepting = Atomic<Bool>(false)

    private struct Lifecycle {
        var started = false
        var stopping = false
        var runningThreads = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    public init(configuration: SandboxConfiguration, state: SandboxState, logger: Logger) throws(SandboxError) {
        guard configuration.workerThreads >= 1 else {
            throw SandboxError(.configuration, "workerThreads must be at least 1 (got \(configuration.workerThreads))")
        }
        let tls: TLSContext
        var generated: GeneratedTLSIdentity?
        do throws(TransportError) {
            switch configuration.identity {
            case .files(let certificate, let privateKey):
                tls = try TLSContext.server(
                    identity: .files(certificate: certificate, privateKey: privateKey), clientCAFile: configuration.clientCAFile)
            case .generated(_, let names):
                let identity = try GeneratedTLSIdentity(extraNames: names)
                generated = identity
                tls = try TLSContext.server(identity: .generated(identity), clientCAFile: configuration.clientCAFile)
            }
        } catch {
            throw SandboxError(error)
        }
        // Parsed once here so a bad key stops the start with a message naming it.
        _ = try ProviderTokenVerifier(configuration: configuration)
        var workers: [SandboxWorker] = []
        for index in 0..<configuration.workerThreads {
            let context = WorkerContext(
                tls: tls,
                state: state,
                verifier: try ProviderTokenVerifier(configuration: configuration),
                seed: state.faultSeed.map { $0 &+ UInt64(index) },
                logger: logger
            )
            context.strictPriorities = configuration.strictPriorities
            context.confirmsAnswers = configuration.confirmsAnswers
            context.idleTimeoutMilliseconds = configuration.idleTimeout.map { UInt64($0.components.seconds) * 1000 }
            workers.append(try SandboxWorker(index: index, context: context))
        }
        self.workers = workers
        do {
            self.acceptorWake = try WakePipe()
        } catch {
            throw SandboxError(.socket, "\(error)")
        }
        self.listener = try ListeningSocket(host: configuration.host, port: configuration.port)
        self.managementListener = try configuration.managementPort.map { port throws(SandboxError) in
            try ListeningSocket(host: configuration.host, port: port)
        }
        self.host = configuration.host
        self.port = listener.port
        self.managementPort = managementListener?.port
        self.shutdownTimeout = configuration.shutdownTimeout
        self.logger = logger
        // Written once the port is bound: a client that sees the file can connect.
        if case .generated(let caOutput?, _) = configuration.identity, let generated {
            try generated.writeCertificateAuthority(to: caOutput)
        }
    }

    public var description: String { "SandboxServer(\(host):\(port))" }

    public func run() async throws {
        startThreads()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await waitForThreads()
            } onGracefulShutdown: {
                self.shutdown()
            }
        } onCancel: {
            self.shutdown(within: .zero)
        }
    }

    /// Starts the graceful shutdown (idempotent); ``run()`` returns once it is done.
    public func shutdown() {
        shutdown(within: shutdownTimeout)
    }

    private func shutdown(within timeout: Duration) {
        lifecycle.withLock { $0.stopping = true }
        stopAccepting.store(true, ordering: .releasing)
        acceptorWake.wake()
        let milliseconds = UInt64(max(0, timeout.components.seconds)) * 1000 + UInt64(max(0, timeout.components.attoseconds) / 1_000_000_000_000_000)
        for worker in workers { worker.beginDrain(within: milliseconds) }
    }

    private func startThreads() {
        let start = lifecycle.withLock { lifecycle -> Bool in
            guard !lifecycle.started, !lifecycle.stopping else { return false }
            lifecycle.started = true
            lifecycle.runningThreads = workers.count + 1
            return true
        }
        guard start else { return }
        for worker in workers {
            IOThread.start(name: "apns-sandbox-worker-\(worker.index)") { [self] in
                worker.run()
                threadFinished()
            }
        }
        IOThread.start(name: "apns-sandbox-accept") { [self] in
            acceptConnections()
            threadFinished()
        }
    }

    private func threadFinished() {
        let waiter = lifecycle.withLock { lifecycle -> CheckedContinuation<Void, Never>? in
            lifecycle.runningThreads -= 1
            guard lifecycle.runningThreads == 0 else { return nil }
            defer { lifecycle.waiter = nil }
            return lifecycle.waiter
        }
        waiter?.resume()
    }

    private func waitForThreads() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished = lifecycle.withLock { lifecycle -> Bool in
                guard lifecycle.started, lifecycle.runningThreads > 0 else { return true }
                lifecycle.waiter = continuation
                return false
            }
            if finished { continuation.resume() }
        }
    }

    /// The accept thread: waits in poll for connections (or the stop signal) and hands each to the
    /// worker with the fewest connections, with the API its listener serves.
    private func acceptConnections() {
        var turn = 0
        let listeners: [(ListeningSocket, ListenerRole)] =
            managementListener.map { [(listener, .push), ($0, .management)] } ?? [(listener, .combined)]
        while !stopAccepting.load(ordering: .acquiring) {
            var pollSet = [pollfd(fd: acceptorWake.readEnd, events: Int16(POLLIN), revents: 0)]
            for (socket, _) in listeners { pollSet.append(pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)) }
            _ = poll(&pollSet, nfds_t(pollSet.count), 1000)
            if pollSet[0].revents != 0 { acceptorWake.drain() }
            for (offset, (socket, role)) in listeners.enumerated() {
                guard pollSet[offset + 1].revents != 0, !stopAccepting.load(ordering: .acquiring) else { continue }
                for _ in 0..<Self.acceptsPerPass {
                    let accepted: Int32?
                    do {
                        accepted = try socket.accept()
                    } catch {
                        // Out of descriptors or memory: back off instead of spinning on a readable listener.
                        logger.warning("cannot accept a connection", metadata: ["sandbox.error": "\(error)"])
                        usleep(100_000)
                        break
                    }
                    guard let accepted else { break }
                    turn += 1
                    leastBusyWorker(turn: turn).adopt(accepted, role: role)
                }
            }
        }
        for (socket, _) in listeners { socket.close() }
    }

    /// Connections accepted per wake-up before checking for the stop signal again.
    static let acceptsPerPass = 64

    private func leastBusyWorker(turn: Int) -> SandboxWorker {
        var best = workers[turn % workers.count]
        var fewest = best.connectionCount.load(ordering: .relaxed)
        for worker in workers {
            let count = worker.connectionCount.load(ordering: .relaxed)
            if count < fewest {
                best = worker
                fewest = count
            }
        }
        return best
    }
}
