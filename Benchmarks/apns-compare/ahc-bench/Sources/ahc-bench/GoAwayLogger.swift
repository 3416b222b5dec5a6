import Logging
import NIOCore
import NIOHTTP2

/// Logs the error code and debug data of every GOAWAY the server sends (AsyncHTTPClient only logs
/// "go away received"), for `--trace-connections`.
final class GoAwayLogger: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame

    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if case .goAway(let lastStreamID, let errorCode, let opaqueData) = frame.payload {
            logger.debug(
                "GOAWAY received",
                metadata: [
                    "http2.last_stream_id": "\(lastStreamID)",
                    "http2.error_code": "\(errorCode)",
                    "http2.debug_data": "\(opaqueData.map { String(buffer: $0) } ?? "")",
                ]
            )
        }
        context.fireChannelRead(data)
    }
}
