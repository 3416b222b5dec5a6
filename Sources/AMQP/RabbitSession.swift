import CRabbitMQ
import Foundation

/// One live connection to the broker: the only owner of a rabbitmq-c connection state.
///
/// Not thread-safe, by rabbitmq-c's design: a session is created, used and destroyed on its
/// connection's I/O thread only. Every C status and RPC reply becomes an ``AMQPError`` in
/// ``check(_:_:)`` or ``error(status:_:)``.
final class RabbitSession {
    private let state: amqp_connection_state_t
    let configuration: AMQPConfiguration
    /// The broker of ``configuration`` this session is connected to.
    let broker: AMQPBroker

    /// Opens the socket to `broker` (with TLS when configured), logs in and negotiates heartbeats.
    init(configuration: AMQPConfiguration, broker: AMQPBroker) throws(AMQPError) {
        guard let state = amqp_new_connection() else {
            throw AMQPError(.connectionFailed, "rabbitmq-c could not allocate a connection")
        }
        self.state = state
        self.configuration = configuration
        self.broker = broker
        try open()
    }

    deinit {
        amqp_destroy_connection(state)
    }

    private func open() throws(AMQPError) {
        let endpoint = "\(broker)"
        let socket: OpaquePointer?
        if let tls = configuration.tls {
            socket = amqp_ssl_socket_new(state)
            guard let socket else { throw AMQPError(.tlsFailed, "could not create a TLS socket") }
            amqp_ssl_socket_set_verify_peer(socket, 1)
            amqp_ssl_socket_set_verify_hostname(socket, 1)
            let caFile = tls.caCertificateFile ?? Self.systemTrustStore
            if let caFile {
                let status = amqp_ssl_socket_set_cacert(socket, caFile)
                guard status == AMQP_STATUS_OK.rawValue else {
                    throw AMQPError(.tlsFailed, "cannot load CA certificates from '\(caFile)': \(Self.describe(status))")
                }
            }
            if let certificate = tls.certificateFile, let key = tls.keyFile {
                let status = amqp_ssl_socket_set_key(socket, certificate, key)
                guard status == AMQP_STATUS_OK.rawValue else {
                    throw AMQPError(.tlsFailed, "cannot load client certificate '\(certificate)' / key '\(key)': \(Self.describe(status))")
                }
            }
        } else {
            socket = amqp_tcp_socket_new(state)
            guard socket != nil else { throw AMQPError(.connectionFailed, "could not create a TCP socket") }
        }
        var connectTimeout = Self.timeval(configuration.connectTimeout)
        var rpcTimeout = Self.timeval(configuration.rpcTimeout)
        errno = 0
        let status = amqp_socket_open_noblock(socket, broker.host, Int32(broker.port), &connectTimeout)
        guard status == AMQP_STATUS_OK.rawValue else {
            // rabbitmq-c connects without blocking; EINPROGRESS says nothing about why it failed.
            let cause = errno != 0 && errno != EINPROGRESS && errno != EAGAIN ? " (\(String(cString: strerror(errno))))" : ""
            if status <= AMQP_STATUS_SSL_ERROR.rawValue, status > _AMQP_STATUS_SSL_NEXT_VALUE.rawValue {
                throw AMQPError(.tlsFailed, "TLS to \(endpoint) failed: \(Self.describe(status))")
            }
            throw AMQPError(.connectionFailed, "cannot connect to \(endpoint): \(Self.describe(status))\(cause)")
        }
        amqp_set_handshake_timeout(state, &connectTimeout)
        amqp_set_rpc_timeout(state, &rpcTimeout)

        let arena = CArena()
        // `connection.blocked`: without the capability the broker blocks this connection under an
        // alarm without saying so. rabbitmq-c merges these with its own capabilities.
        var properties = arena.table([
            "connection_name": .string(configuration.connectionName),
            "product": "push",
            "capabilities": .table(["connection.blocked": .bool(true), "consumer_cancel_notify": .bool(true)]),
        ])
        let heartbeatSeconds = Int32(configuration.heartbeat.components.seconds)
        let reply = push_amqp_login_plain(
            state, configuration.virtualHost, 0, 131_072, heartbeatSeconds, &properties,
            configuration.user, configuration.password
        )
        withExtendedLifetime(arena) {}
        do {
            try check(reply, "login to \(configuration.endpointDescription(of: broker)) as '\(configuration.user)'")
        } catch {
            // With TLS 1.3 the broker checks a client certificate after the client's side of the
            // handshake is done, so a certificate it refuses (or requires but did not get) breaks the
            // TLS session here, during login, not in amqp_socket_open_noblock.
            if configuration.tls != nil, reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION, reply.library_error == AMQP_STATUS_SSL_ERROR.rawValue {
                throw AMQPError(
                    .tlsFailed,
                    "TLS to \(endpoint) failed during login: \(Self.describe(reply.library_error)) (did the broker refuse the client certificate?)"
                )
            }
            // RabbitMQ closes the connection with ACCESS_REFUSED (403) for bad credentials and
            // NOT_ALLOWED (530) for a vhost the user may not use.
            if error.replyCode == 403 || error.replyCode == 530 || error.code == .connectionLost {
                throw AMQPError(.loginRefused, error.message, replyCode: error.replyCode)
            }
            throw error
        }
    }

    private static let systemTrustStore: String? = {
        ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"]
            .first { FileManager.default.fileExists(atPath: $0) }
    }()

    // MARK: Channels and topology (synchronous broker calls, bounded by the RPC timeout)

    func openChannel(_ channel: UInt16) throws(AMQPError) {
        amqp_channel_open(state, channel)
        try check(amqp_get_rpc_reply(state), "opening channel \(channel)")
    }

    func enableConfirms(on channel: UInt16) throws(AMQPError) {
        amqp_confirm_select(state, channel)
        try check(amqp_get_rpc_reply(state), "enabling publisher confirms")
    }

    func declare(_ topology: AMQPTopology, on channel: UInt16) throws(AMQPError) {
        for exchange in topology.exchanges {
            let arena = CArena()
            amqp_exchange_declare(
                state, channel, arena.bytes(exchange.name), arena.bytes(exchange.type), 0,
                exchange.durable ? 1 : 0, 0, 0, arena.table(exchange.arguments)
            )
            try check(amqp_get_rpc_reply(state), "declaring exchange '\(exchange.name)'")
        }
        for queue in topology.queues {
            do throws(AMQPError) {
                try declare(queue, arguments: queue.arguments.merging(queue.creationArguments) { given, _ in given }, on: channel)
            } catch let error
                where error.code == .channelClosed && !queue.creationArguments.isEmpty
                && queue.creationArguments.keys.contains(where: { error.message.contains("inequivalent arg '\($0)'") })
            {
                // The queue exists, created with other creation arguments: it keeps them. Declare it
                // again without them on a fresh channel, so every other argument is still checked.
                confirmChannelClose(channel)
                try openChannel(channel)
                try declare(queue, arguments: queue.arguments, on: channel)
            }
        }
        for binding in topology.bindings {
            let arena = CArena()
            amqp_queue_bind(
                state, channel, arena.bytes(binding.queue), arena.bytes(binding.exchange),
                arena.bytes(binding.routingKey), amqp_empty_table
            )
            try check(amqp_get_rpc_reply(state), "binding queue '\(binding.queue)' to '\(binding.exchange)' with '\(binding.routingKey)'")
        }
    }

    private func declare(_ queue: AMQPTopology.Queue, arguments: AMQPTable, on channel: UInt16) throws(AMQPError) {
        let arena = CArena()
        amqp_queue_declare(
            state, channel, arena.bytes(queue.name), 0, queue.durable ? 1 : 0, queue.exclusive ? 1 : 0,
            queue.autoDelete ? 1 : 0, arena.table(arguments)
        )
        try check(amqp_get_rpc_reply(state), "declaring queue '\(queue.name)'")
    }

    /// Sets the channel's prefetch and starts a consumer; returns the broker-assigned consumer tag.
    func consume(queue: String, prefetch: UInt16, arguments: AMQPTable, on channel: UInt16) throws(AMQPError) -> String {
        amqp_basic_qos(state, channel, 0, prefetch, 0)
        try check(amqp_get_rpc_reply(state), "setting prefetch \(prefetch) on channel \(channel)")
        let arena = CArena()
        let ok = amqp_basic_consume(state, channel, arena.bytes(queue), amqp_empty_bytes, 0, 0, 0, arena.table(arguments))
        try check(amqp_get_rpc_reply(state), "consuming from '\(queue)'")
        guard let ok else { throw AMQPError(.protocolError, "no consume-ok for '\(queue)'") }
        return Self.string(ok.pointee.consumer_tag)
    }

    func cancel(consumerTag: String, on channel: UInt16) throws(AMQPError) {
        let arena = CArena()
        amqp_basic_cancel(state, channel, arena.bytes(consumerTag))
        try check(amqp_get_rpc_reply(state), "cancelling consumer '\(consumerTag)'")
    }

    /// Deletes a queue (tests and operator tools); returns how many messages it held.
    func deleteQueue(_ name: String, on channel: UInt16) throws(AMQPError) -> UInt32 {
        let arena = CArena()
        let ok = amqp_queue_delete(state, channel, arena.bytes(name), 0, 0)
        try check(amqp_get_rpc_reply(state), "deleting queue '\(name)'")
        return ok?.pointee.message_count ?? 0
    }

    /// Looks a queue up without creating it: (messages ready, consumers).
    func inspectQueue(_ name: String, on channel: UInt16) throws(AMQPError) -> (messages: UInt32, consumers: UInt32) {
        let arena = CArena()
        let ok = amqp_queue_declare(state, channel, arena.bytes(name), 1, 0, 0, 0, amqp_empty_table)
        try check(amqp_get_rpc_reply(state), "inspecting queue '\(name)'")
        guard let ok else { throw AMQPError(.protocolError, "no declare-ok for '\(name)'") }
        return (ok.pointee.message_count, ok.pointee.consumer_count)
    }

    // MARK: Asynchronous methods (written now, answered later through frames)

    func publish(_ message: AMQPOutboundMessage, extraHeaders: AMQPTable, on channel: UInt16) throws(AMQPError) {
        let arena = CArena()
        var properties = arena.properties(message.properties, extraHeaders: extraHeaders)
        let status = message.body.withUnsafeBytes { body in
            amqp_basic_publish(
                state, channel, arena.bytes(message.exchange), arena.bytes(message.routingKey),
                message.mandatory ? 1 : 0, 0, &properties,
                amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress))
            )
        }
        try error(status: status, "publishing to '\(message.exchange)' with '\(message.routingKey)'")
    }

    func ack(tag: UInt64, multiple: Bool, on channel: UInt16) throws(AMQPError) {
        try error(status: amqp_basic_ack(state, channel, tag, multiple ? 1 : 0), "acking \(tag)")
    }

    func nack(tag: UInt64, multiple: Bool, requeue: Bool, on channel: UInt16) throws(AMQPError) {
        try error(status: amqp_basic_nack(state, channel, tag, multiple ? 1 : 0, requeue ? 1 : 0), "nacking \(tag)")
    }

    func reject(tag: UInt64, requeue: Bool, on channel: UInt16) throws(AMQPError) {
        try error(status: amqp_basic_reject(state, channel, tag, requeue ? 1 : 0), "rejecting \(tag)")
    }

    /// Closes `channel` from our side and waits for the broker's `close-ok`; frames of other
    /// channels (and this one's, sent before the close) that arrive meanwhile stay queued for
    /// ``nextFrame()``.
    func closeChannel(_ channel: UInt16) throws(AMQPError) {
        try check(amqp_channel_close(state, channel, Int32(AMQP_REPLY_SUCCESS)), "closing channel \(channel)")
    }

    /// Whether rabbitmq-c holds frames it read during an RPC (see ``closeChannel(_:)``).
    var hasQueuedFrames: Bool { amqp_frames_enqueued(state) != 0 }

    /// Answers a broker-initiated channel close so the channel number can be opened again.
    func confirmChannelClose(_ channel: UInt16) {
        var closeOK = amqp_channel_close_ok_t(dummy: 0)
        _ = amqp_send_method(state, channel, push_amqp_channel_close_ok_method, &closeOK)
    }

    /// Closes cleanly; errors are ignored because the session is being discarded either way.
    func close() {
        _ = amqp_connection_close(state, Int32(AMQP_REPLY_SUCCESS))
    }

    // MARK: Reading frames

    /// The socket to poll for readability.
    var socketDescriptor: Int32 { amqp_get_sockfd(state) }

    /// Whether frames are already buffered, so polling the socket would miss them.
    var hasBufferedInput: Bool { amqp_frames_enqueued(state) != 0 || amqp_data_in_buffer(state) != 0 }

    /// Frees memory of frames already handled.
    func releaseBuffers() { amqp_maybe_release_buffers(state) }

    /// The next frame if one is available right now; nil if none. Also sends heartbeats when due
    /// and throws when the broker's heartbeats stopped.
    func nextFrame() throws(AMQPError) -> InboundFrame? {
        var frame = amqp_frame_t()
        var zero = Foundation.timeval(tv_sec: 0, tv_usec: 0)
        let status = amqp_simple_wait_frame_noblock(state, &frame, &zero)
        if status == AMQP_STATUS_TIMEOUT.rawValue { return nil }
        try error(status: status, "reading from the broker")
        return decode(frame)
    }

    private func decode(_ frame: amqp_frame_t) -> InboundFrame {
        let channel = frame.channel
        switch Int32(frame.frame_type) {
        case AMQP_FRAME_METHOD:
            let method = frame.payload.method
            let decoded = method.decoded
            switch method.id {
            case push_amqp_basic_ack_method:
                let ack = decoded!.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee
                return .basicAck(channel: channel, tag: ack.delivery_tag, multiple: ack.multiple != 0)
            case push_amqp_basic_nack_method:
                let nack = decoded!.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee
                return .basicNack(channel: channel, tag: nack.delivery_tag, multiple: nack.multiple != 0)
            case push_amqp_basic_deliver_method:
                let deliver = decoded!.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee
                return .basicDeliver(
                    channel: channel, deliveryTag: deliver.delivery_tag, redelivered: deliver.redelivered != 0,
                    exchange: Self.string(deliver.exchange), routingKey: Self.string(deliver.routing_key)
                )
            case push_amqp_basic_return_method:
                let returned = decoded!.assumingMemoryBound(to: amqp_basic_return_t.self).pointee
                return .basicReturn(
                    channel: channel, replyCode: Int(returned.reply_code), replyText: Self.string(returned.reply_text),
                    exchange: Self.string(returned.exchange), routingKey: Self.string(returned.routing_key)
                )
            case push_amqp_basic_cancel_method:
                let cancel = decoded!.assumingMemoryBound(to: amqp_basic_cancel_t.self).pointee
                return .basicCancel(channel: channel, consumerTag: Self.string(cancel.consumer_tag))
            case push_amqp_channel_close_method:
                let close = decoded!.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
                return .channelClose(channel: channel, replyCode: Int(close.reply_code), replyText: Self.string(close.reply_text))
            case push_amqp_connection_close_method:
                let close = decoded!.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
                var closeOK = amqp_connection_close_ok_t(dummy: 0)
                _ = amqp_send_method(state, 0, push_amqp_connection_close_ok_method, &closeOK)
                return .connectionClose(replyCode: Int(close.reply_code), replyText: Self.string(close.reply_text))
            case push_amqp_connection_blocked_method:
                let blocked = decoded!.assumingMemoryBound(to: amqp_connection_blocked_t.self).pointee
                return .connectionBlocked(reason: Self.string(blocked.reason))
            case push_amqp_connection_unblocked_method:
                return .connectionUnblocked
            default:
                return .otherMethod(channel: channel, id: method.id)
            }
        case AMQP_FRAME_HEADER:
            let header = frame.payload.properties
            let properties = header.decoded.map { Self.properties($0.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee) }
            return .header(
                channel: channel, bodySize: Int(header.body_size), properties: properties ?? AMQPProperties(contentType: nil, persistent: false))
        case AMQP_FRAME_BODY:
            let fragment = frame.payload.body_fragment
            return .body(channel: channel, bytes: Self.bytes(fragment))
        default:
            return .heartbeat
        }
    }

    // MARK: C errors → AMQPError (the one place)

    func check(_ reply: amqp_rpc_reply_t, _ context: String) throws(AMQPError) {
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_NONE:
            throw AMQPError(.protocolError, "\(context): no reply from the broker")
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            try error(status: reply.library_error, context)
            throw AMQPError(.protocolError, "\(context): unknown library error")
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            switch reply.reply.id {
            case push_amqp_connection_close_method:
                let close = reply.reply.decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
                var closeOK = amqp_connection_close_ok_t(dummy: 0)
                _ = amqp_send_method(state, 0, push_amqp_connection_close_ok_method, &closeOK)
                throw AMQPError(
                    .connectionClosed, "\(context): broker closed the connection: \(close.reply_code) \(Self.string(close.reply_text))",
                    replyCode: Int(close.reply_code)
                )
            case push_amqp_channel_close_method:
                let close = reply.reply.decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
                throw AMQPError(
                    .channelClosed, "\(context): broker closed the channel: \(close.reply_code) \(Self.string(close.reply_text))",
                    replyCode: Int(close.reply_code)
                )
            default:
                throw AMQPError(.protocolError, "\(context): unexpected server method \(reply.reply.id)")
            }
        default:
            throw AMQPError(.protocolError, "\(context): unknown reply type")
        }
    }

    func error(status: Int32, _ context: String) throws(AMQPError) {
        guard status < 0 else { return }
        let description = Self.describe(status)
        switch status {
        case AMQP_STATUS_TIMEOUT.rawValue:
            throw AMQPError(.timeout, "\(context): timed out")
        case AMQP_STATUS_HEARTBEAT_TIMEOUT.rawValue:
            throw AMQPError(.connectionLost, "\(context): no heartbeat from the broker for \(configuration.heartbeat * 2)")
        case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED.rawValue, AMQP_STATUS_SSL_PEER_VERIFY_FAILED.rawValue,
            AMQP_STATUS_SSL_CONNECTION_FAILED.rawValue:
            throw AMQPError(.tlsFailed, "\(context): \(description)")
        default:
            throw AMQPError(.connectionLost, "\(context): \(description)")
        }
    }

    static func describe(_ status: Int32) -> String {
        String(cString: amqp_error_string2(status))
    }

    // MARK: Copying out of C

    static func bytes(_ bytes: amqp_bytes_t) -> [UInt8] {
        guard bytes.len > 0, let pointer = bytes.bytes else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: bytes.len))
    }

    static func string(_ bytes: amqp_bytes_t) -> String {
        guard bytes.len > 0, let pointer = bytes.bytes else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: bytes.len), as: UTF8.self)
    }

    static func properties(_ p: amqp_basic_properties_t) -> AMQPProperties {
        func has(_ flag: amqp_flags_t) -> Bool { p._flags & flag != 0 }
        return AMQPProperties(
            contentType: has(push_amqp_flag_content_type) ? string(p.content_type) : nil,
            contentEncoding: has(push_amqp_flag_content_encoding) ? string(p.content_encoding) : nil,
            headers: has(push_amqp_flag_headers) ? table(p.headers) : [:],
            persistent: has(push_amqp_flag_delivery_mode) && p.delivery_mode == 2,
            priority: has(push_amqp_flag_priority) ? p.priority : nil,
            correlationID: has(push_amqp_flag_correlation_id) ? string(p.correlation_id) : nil,
            replyTo: has(push_amqp_flag_reply_to) ? string(p.reply_to) : nil,
            expiration: has(push_amqp_flag_expiration) ? string(p.expiration) : nil,
            messageID: has(push_amqp_flag_message_id) ? string(p.message_id) : nil,
            timestamp: has(push_amqp_flag_timestamp) ? p.timestamp : nil,
            type: has(push_amqp_flag_type) ? string(p.type) : nil,
            appID: has(push_amqp_flag_app_id) ? string(p.app_id) : nil
        )
    }

    static func table(_ table: amqp_table_t, depth: Int = 0) -> AMQPTable {
        var result: AMQPTable = [:]
        guard table.num_entries > 0, let entries = table.entries else { return result }
        for index in 0..<Int(table.num_entries) {
            let entry = entries[index]
            result[string(entry.key)] = value(entry.value, depth: depth + 1)
        }
        return result
    }

    /// One header value; tables and arrays deeper than ``AMQPFieldValue/maximumDepth`` are not read.
    static func value(_ value: amqp_field_value_t, depth: Int = 0) -> AMQPFieldValue {
        let kind = Int32(value.kind)
        if depth > AMQPFieldValue.maximumDepth, kind == Int32(AMQP_FIELD_KIND_TABLE.rawValue) || kind == Int32(AMQP_FIELD_KIND_ARRAY.rawValue) {
            return AMQPFieldValue.tooDeep
        }
        return switch kind {
        case Int32(AMQP_FIELD_KIND_BOOLEAN.rawValue): .bool(value.value.boolean != 0)
        case Int32(AMQP_FIELD_KIND_I8.rawValue): .int8(value.value.i8)
        case Int32(AMQP_FIELD_KIND_U8.rawValue): .uint8(value.value.u8)
        case Int32(AMQP_FIELD_KIND_I16.rawValue): .int16(value.value.i16)
        case Int32(AMQP_FIELD_KIND_U16.rawValue): .uint16(value.value.u16)
        case Int32(AMQP_FIELD_KIND_I32.rawValue): .int32(value.value.i32)
        case Int32(AMQP_FIELD_KIND_U32.rawValue): .uint32(value.value.u32)
        case Int32(AMQP_FIELD_KIND_I64.rawValue): .int64(value.value.i64)
        case Int32(AMQP_FIELD_KIND_U64.rawValue): .int64(Int64(bitPattern: value.value.u64))
        case Int32(AMQP_FIELD_KIND_F32.rawValue): .float(value.value.f32)
        case Int32(AMQP_FIELD_KIND_F64.rawValue): .double(value.value.f64)
        case Int32(AMQP_FIELD_KIND_UTF8.rawValue): .string(string(value.value.bytes))
        case Int32(AMQP_FIELD_KIND_BYTES.rawValue): .bytes(bytes(value.value.bytes))
        case Int32(AMQP_FIELD_KIND_TIMESTAMP.rawValue): .timestamp(value.value.u64)
        case Int32(AMQP_FIELD_KIND_TABLE.rawValue): .table(table(value.value.table, depth: depth))
        case Int32(AMQP_FIELD_KIND_ARRAY.rawValue):
            .array(
                value.value.array.num_entries > 0
                    ? (0..<Int(value.value.array.num_entries)).map { Self.value(value.value.array.entries[$0], depth: depth + 1) } : []
            )
        default: .void
        }
    }

    static func timeval(_ duration: Duration) -> Foundation.timeval {
        let (seconds, attoseconds) = duration.components
        return Foundation.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}

/// A frame from the broker, copied out of rabbitmq-c's buffers.
enum InboundFrame {
    case basicAck(channel: UInt16, tag: UInt64, multiple: Bool)
    case basicNack(channel: UInt16, tag: UInt64, multiple: Bool)
    case basicReturn(channel: UInt16, replyCode: Int, replyText: String, exchange: String, routingKey: String)
    case basicDeliver(channel: UInt16, deliveryTag: UInt64, redelivered: Bool, exchange: String, routingKey: String)
    case basicCancel(channel: UInt16, consumerTag: String)
    case header(channel: UInt16, bodySize: Int, properties: AMQPProperties)
    case body(channel: UInt16, bytes: [UInt8])
    case channelClose(channel: UInt16, replyCode: Int, replyText: String)
    case connectionClose(replyCode: Int, replyText: String)
    case connectionBlocked(reason: String)
    case connectionUnblocked
    case otherMethod(channel: UInt16, id: UInt32)
    case heartbeat
}
