import AMQP
import Foundation
import Logging

var logger = Logger(label: "bench")
logger.logLevel = .debug
for url in ["amqp://guest:wrong@127.0.0.1:35700/%2f", "amqp://127.0.0.1:1/%2f"] {
    let connection = AMQPConnection(configuration: try AMQPConfiguration(url: url, connectionName: "bench"), logger: logger)
    let start = ContinuousClock.now
    do { try await connection.waitUntilConnected(timeout: .seconds(2)) } catch { print("error after \(ContinuousClock.now - start): \(error)") }
    let closeStart = ContinuousClock.now
    await connection.close()
    print("close took \(ContinuousClock.now - closeStart)")
}
