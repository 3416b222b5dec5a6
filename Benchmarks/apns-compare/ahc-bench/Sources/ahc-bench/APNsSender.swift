import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOSSL

/// One APNs client the way APNSwift 6's `APNSClient.send` is built (Sources/APNS/APNSClient.swift):
/// its own `HTTPClient` (`httpVersion: .automatic`, so one HTTP/2 connection), default headers copied
/// per request, the token awaited from an actor, the payload encoded by JSONEncoder into a
/// ByteBuffer, `execute(_:deadline: .distantFuture)`, `apns-id`/`apns-unique-id` parsed as UUIDs,
/// and on an error status the body collected (up to 1 KiB) and decoded.
final class APNsSender: Sendable {
    struct Answer: Sendable {
        var status: Int
        var reason: String?
    }

    private struct ErrorBody: Decodable {
        var reason: String
        var timestamp: Double?
    }

    private let httpClient: HTTPClient
    private let baseURL: String
    private let tokens: ProviderTokenCache
    private let encoder = JSONEncoder()
    private let allocator = ByteBufferAllocator()
    private let defaultHeaders: HTTPHeaders = {
        var headers = HTTPHeaders()
        headers.reserveCapacity(10)
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "user-agent", value: "APNS/swift-nio")
        return headers
    }()

    /// - Parameters:
    ///   - endpoint: e.g. `https://127.0.0.1:2197`.
    ///   - caFile: PEM CA to trust instead of the system's (apns-sandbox's `--ca-out`).
    ///   - traceConnections: Log AsyncHTTPClient's connection activity and every GOAWAY received to
    ///     stderr (debug level); otherwise nothing is logged.
    init(endpoint: String, caFile: String?, tokens: ProviderTokenCache, traceConnections: Bool) {
        var connectionLogger = Logger(
            label: "ahc-bench",
            factory: { label -> any LogHandler in
                traceConnections ? StreamLogHandler.standardError(label: label) : SwiftLogNoOpLogHandler()
            })
        connectionLogger.logLevel = .debug
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.trustRoots = .file(caFile) }
        var configuration = HTTPClient.Configuration()
        configuration.tlsConfiguration = tls
        configuration.httpVersion = .automatic
        if traceConnections {
            configuration.http2ConnectionDebugInitializer = { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(GoAwayLogger(logger: connectionLogger))
                }
            }
        }
        httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration, backgroundActivityLogger: connectionLogger)
        baseURL = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.tokens = tokens
    }

    /// - Parameter drainBody: Read the (empty) body of a 200 to its end before returning. APNSwift
    ///   does not; dropping the unread body can make AsyncHTTPClient reset the stream (RST_STREAM
    ///   CANCEL), which nghttp2 servers count against their stream-reset rate limit.
    func send(_ payload: AlertPayload, deviceToken: String, topic: String, drainBody: Bool = false) async throws -> Answer {
        var headers = defaultHeaders
        headers.add(name: "apns-push-type", value: "alert")
        headers.add(name: "apns-priority", value: "10")
        headers.add(name: "apns-topic", value: topic)
        headers.add(name: "authorization", value: try await tokens.authorization())

        var body = allocator.buffer(capacity: 0)
        try encoder.encode(payload, into: &body)

        var request = HTTPClientRequest(url: "\(baseURL)/3/device/\(deviceToken)")
        request.method = .POST
        request.headers = headers
        request.body = .bytes(body)

        // APNSwift waits forever (`.distantFuture`); run.sh bounds the whole process with `timeout`.
        let response = try await httpClient.execute(request, deadline: .distantFuture)
        _ = response.headers.first(name: "apns-id").flatMap { UUID(uuidString: $0) }
        _ = response.headers.first(name: "apns-unique-id").flatMap { UUID(uuidString: $0) }
        if response.status == .ok {
            if drainBody { _ = try await response.body.collect(upTo: 1024) }
            return Answer(status: 200)
        }
        let bytes = try await response.body.collect(upTo: 1024)
        let error = try JSONDecoder().decode(ErrorBody.self, from: bytes)
        return Answer(status: Int(response.status.code), reason: error.reason)
    }

    func shutdown() async throws {
        try await httpClient.shutdown()
    }
}
