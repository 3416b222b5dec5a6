import CNghttp2

/// The nghttp2 callback table and options every client session uses, owned and freed here.
///
/// Each callback finds its ``ClientConnection`` through the session's `user_data` (one `Unmanaged`
/// lookup) and returns what the connection answers; nothing here keeps state. nghttp2 copies both
/// into each session, so one instance serves every connection.
final class ClientHTTP2Callbacks: @unchecked Sendable {
    let callbacks: OpaquePointer
    let options: OpaquePointer

    init() throws(APNsClientError) {
        var callbacks: OpaquePointer?
        var result = nghttp2_session_callbacks_new(&callbacks)
        guard result == 0, let callbacks else { throw APNsClientError.nghttp2("nghttp2_session_callbacks_new", result) }
        var options: OpaquePointer?
        result = nghttp2_option_new(&options)
        guard result == 0, let options else {
            nghttp2_session_callbacks_del(callbacks)
            throw APNsClientError.nghttp2("nghttp2_option_new", result)
        }
        self.callbacks = callbacks
        self.options = options
        // No priority tree: closed streams are forgotten at once (1000 streams a connection churn fast).
        nghttp2_option_set_no_closed_streams(options, 1)

        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let name, let value, let userData else { return 0 }
            return ClientConnection.from(userData).header(
                streamID: frame.pointee.hd.stream_id,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength)
            )
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            guard let data, let userData else { return 0 }
            return ClientConnection.from(userData).data(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            return ClientConnection.from(userData).frameReceived(frame)
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            return ClientConnection.from(userData).frameSent(frame)
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, _, userData in
            guard let frame, let userData else { return 0 }
            return ClientConnection.from(userData).frameNotSent(frame)
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            guard let userData else { return 0 }
            return ClientConnection.from(userData).streamClosed(streamID, errorCode: errorCode)
        }
    }

    deinit {
        nghttp2_session_callbacks_del(callbacks)
        nghttp2_option_del(options)
    }

    /// Reads a request body for nghttp2 (`nghttp2_data_provider.read_callback`).
    static let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
        guard let buffer, let flags, let userData else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        return ClientConnection.from(userData).readRequestBody(
            streamID: streamID,
            into: UnsafeMutableBufferPointer(start: buffer, count: length),
            flags: flags
        )
    }
}
