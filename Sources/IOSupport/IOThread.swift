import Foundation
import Glibc
import Synchronization

/// A dedicated I/O thread (a C handle's owner loops on it) that can be awaited: started with
/// `SIGPIPE` blocked, so a write to a peer that went away is an `EPIPE` error, not the end of the
/// process.
public final class IOThread: Sendable {
    private let exit = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    private init() {}

    /// Starts `body` on a new thread named `name` (names show in `top -H` and crash reports).
    @discardableResult
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) -> IOThread {
        let handle = IOThread()
        let thread = Thread {
            IOThread.blockSIGPIPE()
            body()
            let waiters = handle.exit.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.done = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = name
        thread.start()
        return handle
    }

    /// Whether the body returned.
    public var hasExited: Bool { exit.withLock { $0.done } }

    /// Returns once the body returned.
    public func join() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = exit.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Blocks this thread's `SIGPIPE` (for threads started elsewhere).
    public static func blockSIGPIPE() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }
}
