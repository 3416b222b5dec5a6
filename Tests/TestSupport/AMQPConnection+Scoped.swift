import AMQP

/// A connection to `url` (the shared test broker by default) named `name`, connected (within 15 s)
/// before `body` runs and closed after it, whatever happens. For checking and deleting queues after a
/// fixture's own connection closed, and for the AMQP tests themselves. Logs as `name`
/// (see ``TestLogger``).
public func withAMQPConnection<T>(
    url: String = TestServers.amqpURL,
    name: String,
    topology: AMQPTopology = .empty,
    configure: (inout AMQPConfiguration) -> Void = { _ in },
    _ body: (AMQPConnection) async throws -> T
) async throws -> T {
    var configuration = try AMQPConfiguration(url: url, connectionName: name)
    configure(&configuration)
    let connection = AMQPConnection(configuration: configuration, topology: topology, logger: TestLogger.make(name))
    do {
        try await connection.waitUntilConnected(timeout: .seconds(15))
        let result = try await body(connection)
        await connection.close()
        return result
    } catch {
        await connection.close()
        throw error
    }
}
