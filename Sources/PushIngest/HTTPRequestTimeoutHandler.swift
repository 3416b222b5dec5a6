import HTTPTypes
import Metrics
import NIOCore
import NIOHTTPTypes

/// Bounds every request of a connection by ``IngestConfiguration/requestTimeout``, from the arrival of
/// its head to the end of its answer: a body that never finishes arriving ends in `408
/// {"error":"request_timeout"}`, a Redis that answers too slowly in `503 {"error":"timeout"}`, and
/// either closes the connection instead of hanging.
///
/// Sits in the channel pipeline between the HTTP codec and Hummingbird (see
/// ``HTTPRequestDeadlines`` for the bookkeeping). On timeout it writes the answer itself, closes the
/// connection, and drops whatever the late handler writes afterwards; closing ends the handler's body
/// read at once, and a Redis command in flight ends within the Redis command timeout.
final class HTTPRequestTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    private let description: String
    private let timeouts: Counter
    private var deadlines = HTTPRequestDeadlines<NIODeadline>()
    private var timer: Scheduled<Void>?

    init(timeout: Duration, timeouts: Counter) {
        self.timeout = Self.timeAmount(timeout)
        self.description = "\(timeout)"
        self.timeouts = timeouts
    }

    /// `duration` as NIO's `TimeAmount` (nanoseconds).
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            perform(deadlines.requestStarted(deadline: .now() + timeout), context: context)
        case .end:
            deadlines.requestEnded()
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if deadlines.hasTimedOut {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head:
            deadlines.answerBegan()
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            context.write(data, promise: promise)
            perform(deadlines.answerEnded(), context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func perform(_ action: HTTPRequestDeadlines<NIODeadline>.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .schedule(let deadline):
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(deadline: deadline) {
                let (handler, context) = loopBound.value
                handler.timer = nil
                handler.perform(handler.deadlines.timerFired(now: .now()), context: context)
            }
        case .timeOut(let bodyArrived):
            timeouts.increment()
            let error =
                bodyArrived
                ? IngestError(.timeout, "the request took longer than \(description); try again")
                : IngestError(
                    .requestTimeout, field: "body", "did not arrive within \(description) (less than the Content-Length was sent, or too slowly)")
            let body = ByteBuffer(string: error.jsonBody)
            var head = HTTPResponse(status: HTTPResponse.Status(code: error.status))
            head.headerFields[.contentType] = "application/json"
            head.headerFields[.contentLength] = String(body.readableBytes)
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }
}
