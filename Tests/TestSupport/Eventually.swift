/// Polls `condition` every `poll` until it holds; throws ``TestFailure`` ("`what`: not true within
/// `timeout`") if it never does. For what the code under test does in the background: a message
/// consumed, a record written, a queue drained.
///
/// The defaults are the longest bound the suites' copies used (30 s) and the poll most of them used
/// (50 ms): the bound is only reached when the test fails anyway, so a generous one costs nothing
/// while the suite passes. Poll more slowly (`poll:`) when the condition itself is expensive, such as
/// a large admin listing.
public func eventually(
    _ what: String,
    timeout: Duration = .seconds(30),
    poll: Duration = .milliseconds(50),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: poll)
    }
    throw TestFailure("\(what): not true within \(timeout)")
}
