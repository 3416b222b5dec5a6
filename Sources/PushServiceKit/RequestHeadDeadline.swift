public import Hummingbird
public import HummingbirdCore
public import Logging
public import NIOCore
import NIOHTTPTypes

/// A deadline on the request head: from a request's first byte to its last header line. A client
/// that sends its head a byte at a time (slowloris) would otherwise hold a connection, and enough of
/// them every connection the server allows; the request timer starts only once the head is whole.
/// This timer starts at a request's first byte, so keep-alive connections may still wait as long
/// as the idle timeout allows between requests.
///
/// Two handlers: ``RawGuard`` in front of the HTTP decoder sees the first byte; the decoder's side
/// (``HeadSignal``, after it) says when the head is complete and when the answer ended, through
/// outbound user events, which flow to the front of the pipeline.
public enum RequestHeadDeadline {
    /// Told by the decoded side to the raw side.
    enum Event {
        /// A whole request head was decoded: stop the timer.
        case headArrived
        /// The answer was written: the next byte starts the next request's timer.
        case answerEnded
    }

    /// An HTTP/1 server whose connections close when a request head takes longer than `timeout`
    /// from its first byte; with `includingBody`, the whole request (head and body: for a server
    /// without a request timeout of its own, where a body sent a byte at a time would otherwise hold
    /// the connection).
    public static func http1(configuration: HTTP1Channel.Configuration, timeout: Duration, includingBody: Bool = false) -> HTTPServerBuilder {
        var guarded = configuration
        let others = configuration.additionalChannelHandlers
        guarded.additionalChannelHandlers = { [HeadSignal(includingBody: includingBody)] + others() }
        let final = guarded
        return .init { responder in
            GuardedHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: final), timeout: timeout)
        }
    }

    /// The connection's raw bytes, before the HTTP decoder.
    final class RawGuard: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let timeout: TimeAmount
        private var waitingForHead = false
        private var headComplete = false
        private var timer: Scheduled<Void>?

        init(timeout: Duration) {
            let (seconds, attoseconds) = timeout.components
            self.timeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if !waitingForHead && !headComplete {
                waitingForHead = true
                let channel = context.channel
                timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            }
            context.fireChannelRead(data)
        }

        func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
            guard let event = event as? Event else {
                context.triggerUserOutboundEvent(event, promise: promise)
                return
            }
            switch event {
            case .headArrived:
                timer?.cancel()
                timer = nil
                waitingForHead = false
                headComplete = true
            case .answerEnded:
                headComplete = false
            }
            promise?.succeed()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            timer?.cancel()
            timer = nil
        }
    }

    /// After the decoder: tells ``RawGuard`` when a head (or, `includingBody`, the whole request)
    /// arrived and when its answer ended.
    final class HeadSignal: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart

        let includingBody: Bool

        init(includingBody: Bool) { self.includingBody = includingBody }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head where !includingBody, .end where includingBody:
                context.triggerUserOutboundEvent(Event.headArrived, promise: nil)
            default:
                break
            }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            let ended = if case .end = unwrapOutboundIn(data) { true } else { false }
            context.write(data, promise: promise)
            if ended { context.triggerUserOutboundEvent(Event.answerEnded, promise: nil) }
        }
    }

    struct GuardedHTTP1Channel: ServerChildChannel {
        typealias Value = HTTP1Channel.Value
        let inner: HTTP1Channel
        let timeout: Duration

        func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
            do {
                try channel.pipeline.syncOperations.addHandler(RawGuard(timeout: timeout))
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
            return inner.setup(channel: channel, logger: logger)
        }

        func handle(value: Value, logger: Logger) async {
            await inner.handle(value: value, logger: logger)
        }
    }
}
