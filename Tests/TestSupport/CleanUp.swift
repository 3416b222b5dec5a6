/// Runs `body`, then `cleanUp` whether `body` threw or not, and returns `body`'s result: the
/// `defer` a fixture needs for asynchronous clean-up (deleting its queues and keys, closing its
/// connections). `body`'s error wins over one from `cleanUp`, so a failing test reports why it failed,
/// not what the clean-up tripped over afterwards.
public func withCleanUp<Value>(_ body: () async throws -> Value, cleanUp: () async throws -> Void) async throws -> Value {
    let result: Result<Value, any Error>
    do {
        result = .success(try await body())
    } catch {
        result = .failure(error)
    }
    do {
        try await cleanUp()
    } catch {
        if case .success = result { throw error }
    }
    return try result.get()
}
