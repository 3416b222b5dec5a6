import Logging
import ServiceLifecycle

/// Runs `services` in a ``ServiceGroup`` (no signal handling) while `body` runs, then shuts the group
/// down gracefully, as SIGTERM would in production, and waits for it to return.
///
/// Graceful shutdown is part of what the tests check: if the group has not returned `shutdownWithin`
/// after it was asked to stop, it is cancelled and this throws a ``TestFailure`` naming the services
/// and the bound. When `body` throws, the group is shut down the same way and `body`'s error is
/// rethrown. An error a service threw is rethrown once the group has stopped.
///
/// `body` gets the group, to trigger the shutdown itself in the middle of work (the drain tests).
public func withRunningServices<Value>(
    _ services: [any Service],
    logger: Logger,
    shutdownWithin bound: Duration = .seconds(30),
    _ body: (ServiceGroup) async throws -> Value
) async throws -> Value {
    let group = ServiceGroup(services: services, gracefulShutdownSignals: [], cancellationSignals: [], logger: logger)
    let running = Task { try await group.run() }
    let value: Value
    do {
        value = try await body(group)
    } catch {
        await group.triggerGracefulShutdown()
        _ = await running.result
        throw error
    }
    await group.triggerGracefulShutdown()
    let started = ContinuousClock.now
    let stoppedInTime = await withTaskGroup(of: Bool.self) { race in
        race.addTask {
            _ = await running.result
            return true
        }
        race.addTask {
            do {
                try await Task.sleep(for: bound)
                return false
            } catch {
                return true  // cancelled: the group returned first
            }
        }
        let first = await race.next() ?? true
        // Past the bound: cancel the group so the test fails now instead of at its time limit.
        if !first { running.cancel() }
        race.cancelAll()
        return first
    }
    guard stoppedInTime else {
        let names = services.map { String(describing: type(of: $0)) }.joined(separator: ", ")
        throw TestFailure("\(names) did not stop within \(bound) of graceful shutdown (cancelled after \(ContinuousClock.now - started))")
    }
    try await running.value
    return value
}
