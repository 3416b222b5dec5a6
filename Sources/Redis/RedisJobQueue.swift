import Foundation
import Synchronization

/// Work handed from async callers to a connection's thread.
struct RedisJob: Sendable {
    enum Kind: Sendable {
        case single(RedisCommand, CheckedContinuation<Result<RedisReply, RedisError>, Never>)
        case batch([RedisCommand], CheckedContinuation<Result<[RedisReply], RedisError>, Never>)
        /// Resolved by the next connection attempt (or at once when connected).
        case connect(CheckedContinuation<Result<Void, RedisError>, Never>)
    }

    let kind: Kind
    /// While Redis is unreachable the job waits for a reconnection until this instant, then fails.
    let deadline: ContinuousClock.Instant

    func fail(_ error: RedisError) {
        switch kind {
        case .single(_, let continuation): continuation.resume(returning: .failure(error))
        case .batch(_, let continuation): continuation.resume(returning: .failure(error))
        case .connect(let continuation): continuation.resume(returning: .failure(error))
        }
    }

    var isConnect: Bool {
        if case .connect = kind { true } else { false }
    }
}

/// The queue between callers (any task, any thread) and one connection thread, behind one condition lock.
///
/// Callers only append and signal; the thread takes *everything* queued at once, which is what makes
/// concurrent callers share one pipelined write. The queue is bounded by the callers themselves: each
/// queued job is a suspended caller.
final class RedisJobQueue: @unchecked Sendable {
    // @unchecked: every stored var is read and written only with `condition` locked.
    private let condition = NSCondition()
    private var jobs: [RedisJob] = []
    private var closing = false
    private var finished = false
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []

    /// Written by the connection thread, read by readiness checks.
    let isConnected = Atomic<Bool>(false)

    /// Queues a job; false once closing (the caller then fails the job itself, outside the lock).
    func enqueue(_ job: RedisJob) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !closing else { return false }
        jobs.append(job)
        if jobs.count == 1 { condition.signal() }
        return true
    }

    /// For the connection thread: waits until a job is queued, closing is requested or `deadline`
    /// passes (nil: no deadline), then moves all queued jobs into `taken`. Returns whether closing.
    func take(into taken: inout [RedisJob], waitingUntil deadline: ContinuousClock.Instant?) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty && !closing {
            guard let deadline else {
                condition.wait()
                continue
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { break }
            let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) * 1e-18
            _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
        }
        if taken.isEmpty {
            swap(&taken, &jobs)
        } else {
            taken.append(contentsOf: jobs)
            jobs.removeAll(keepingCapacity: true)
        }
        return closing
    }

    /// Stops accepting jobs and wakes the thread, which drains what was queued and exits.
    func requestClose() {
        condition.lock()
        closing = true
        condition.signal()
        condition.unlock()
    }

    /// Returns once the connection thread has exited (at once if it already has).
    func waitUntilFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if finished {
                condition.unlock()
                continuation.resume()
            } else {
                closeWaiters.append(continuation)
                condition.unlock()
            }
        }
    }

    /// The thread's last act.
    func markFinished() {
        condition.lock()
        finished = true
        let waiters = closeWaiters
        closeWaiters = []
        condition.unlock()
        for waiter in waiters { waiter.resume() }
    }
}
