import CNghttp2

/// A frame nghttp2 received or sent, as the session's owner sees it (no C types leave this module).
public enum HTTP2Frame: Equatable {
    case data(streamID: Int32, endStream: Bool)
    /// HEADERS; `isRequest` on a server for the first HEADERS of a client stream.
    case headers(streamID: Int32, endStream: Bool)
    case settings(ack: Bool)
    case ping(ack: Bool)
    /// GOAWAY with the last stream the peer will process, its error code and (up to 512 bytes of)
    /// its debug data as text.
    case goaway(lastStreamID: Int32, errorCode: UInt32, debugData: String)
    case resetStream(streamID: Int32, errorCode: UInt32)
    case other(streamID: Int32)
}

/// HTTP/2 error codes used here (RFC 9113 §7).
public enum HTTP2ErrorCode {
    public static let noError: UInt32 = NGHTTP2_NO_ERROR.rawValue
    public static let protocolError: UInt32 = NGHTTP2_PROTOCOL_ERROR.rawValue
    public static let refusedStream: UInt32 = NGHTTP2_REFUSED_STREAM.rawValue
    public static let cancel: UInt32 = NGHTTP2_CANCEL.rawValue
}

/// What a session tells its owner, on the owner's thread, from inside ``HTTP2Session/receive(_:)`` or
/// the flush. Methods a side does not need have empty defaults.
public protocol HTTP2SessionDelegate: AnyObject {
    /// Server: a client opened a stream with request HEADERS.
    func http2RequestBegan(streamID: Int32)
    func http2Header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
    func http2Data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>)
    func http2FrameReceived(_ frame: HTTP2Frame)
    func http2FrameSent(_ frame: HTTP2Frame)
    /// nghttp2 gave up on a frame before sending it (the stream was never seen by the peer if it was
    /// its HEADERS).
    func http2FrameNotSent(_ frame: HTTP2Frame)
    func http2StreamClosed(streamID: Int32, errorCode: UInt32)
    /// Copies the next part of `streamID`'s body into `buffer`; `finished` once all of it was given.
    func http2Body(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> (count: Int, finished: Bool)
}

extension HTTP2SessionDelegate {
    public func http2RequestBegan(streamID: Int32) {}
    public func http2FrameSent(_ frame: HTTP2Frame) {}
    public func http2FrameNotSent(_ frame: HTTP2Frame) {}
}

/// Header fields for one HEADERS frame, packed in one buffer (no allocation per field). A block can
/// be emptied with ``removeAll()`` and filled again: one block serves request after request without
/// allocating.
///
/// A field added with `indexed: false` is sent as a literal never added to the HPACK dynamic table
/// (a value that differs per request, such as an id, would only push the useful entries out).
public struct HTTP2HeaderBlock {
    private var text: [UInt8] = []
    private var ranges: [(name: Range<Int>, value: Range<Int>, indexed: Bool)] = []
    /// nghttp2's view of the fields, rebuilt for each submit in storage kept across submits.
    private var nameValues: [nghttp2_nv] = []

    public init(bytes: Int = 512, fields: Int = 12) {
        text.reserveCapacity(bytes)
        ranges.reserveCapacity(fields)
        nameValues.reserveCapacity(fields)
    }

    /// Fields added so far.
    public var count: Int { ranges.count }

    /// The fields as text, in order (for tests and logs; submitting never builds them).
    public var fields: [(name: String, value: String)] {
        ranges.map { range in
            (String(decoding: text[range.name], as: UTF8.self), String(decoding: text[range.value], as: UTF8.self))
        }
    }

    /// The names of the fields added with `indexed: false`, in order.
    public var unindexedNames: [String] {
        ranges.filter { !$0.indexed }.map { String(decoding: text[$0.name], as: UTF8.self) }
    }

    /// Forgets every field, keeping the storage.
    public mutating func removeAll() {
        text.removeAll(keepingCapacity: true)
        ranges.removeAll(keepingCapacity: true)
    }

    public mutating func add(_ name: String, _ value: String, indexed: Bool = true) {
        let nameStart = text.count
        append(name)
        let valueStart = text.count
        append(value)
        ranges.append((nameStart..<valueStart, valueStart..<text.count, indexed))
    }

    /// Adds a field whose value is `prefix` followed by `value` (a path and an id), without joining
    /// them into a string first.
    public mutating func add(_ name: String, _ prefix: String, _ value: String) {
        let nameStart = text.count
        append(name)
        let valueStart = text.count
        append(prefix)
        append(value)
        ranges.append((nameStart..<valueStart, valueStart..<text.count, true))
    }

    /// Adds a field whose value is `value` in decimal, without formatting a string.
    public mutating func add(_ name: String, decimal value: Int, indexed: Bool = true) {
        let nameStart = text.count
        append(name)
        let valueStart = text.count
        if value < 0 { text.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        repeat {
            text.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        text[(value < 0 ? valueStart + 1 : valueStart)...].reverse()
        ranges.append((nameStart..<valueStart, valueStart..<text.count, indexed))
    }

    /// Appends a string's UTF-8 bytes in one copy (iterating `utf8` goes byte by byte).
    private mutating func append(_ string: String) {
        var string = string
        string.withUTF8 { text.append(contentsOf: $0) }
    }

    /// Calls `body` with nghttp2's view of the fields (valid only inside `body`).
    fileprivate mutating func withNameValues<Result>(_ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> Result) -> Result {
        // Taken out of `self` so that filling it neither copies it nor overlaps the access to `text`.
        var nameValues = self.nameValues
        self.nameValues = []
        defer {
            nameValues.removeAll(keepingCapacity: true)
            self.nameValues = nameValues
        }
        let ranges = self.ranges
        return text.withUnsafeMutableBufferPointer { bytes -> Result in
            let base = bytes.baseAddress!
            for range in ranges {
                nameValues.append(
                    nghttp2_nv(
                        name: base + range.name.lowerBound, value: base + range.value.lowerBound,
                        namelen: range.name.count, valuelen: range.value.count,
                        flags: UInt8(range.indexed ? NGHTTP2_NV_FLAG_NONE.rawValue : NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
                    )
                )
            }
            return nameValues.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}

/// One nghttp2 session (client or server side), owned and freed here, confined to its owner's
/// thread. nghttp2's callbacks reach the session through `user_data` (one `Unmanaged` lookup) and the
/// session hands them to its ``HTTP2SessionDelegate``, which must outlive it (it owns the session).
public final class HTTP2Session {
    public enum Role {
        case client
        case server
    }

    public struct Setting {
        fileprivate let entry: nghttp2_settings_entry

        /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
        public static func maximumConcurrentStreams(_ value: UInt32) -> Setting {
            Setting(entry: nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: value))
        }

        /// `SETTINGS_INITIAL_WINDOW_SIZE` (per stream).
        public static func initialWindowSize(_ value: UInt32) -> Setting {
            Setting(entry: nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: value))
        }

        /// `SETTINGS_ENABLE_PUSH`.
        public static func enablePush(_ enabled: Bool) -> Setting {
            Setting(entry: nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: enabled ? 1 : 0))
        }
    }

    private let session: OpaquePointer
    unowned(unsafe) let delegate: any HTTP2SessionDelegate

    /// Starts a session and queues its SETTINGS (and, if given, a larger connection receive window).
    public init(role: Role, delegate: any HTTP2SessionDelegate, settings: [Setting], connectionWindow: Int32? = nil) throws(TransportError) {
        self.delegate = delegate
        let table = HTTP2CallbackTable.shared
        var created: OpaquePointer?
        // `self` is not fully initialised yet: the session gets its user_data right after creation.
        let result: Int32
        switch role {
        case .client: result = nghttp2_session_client_new2(&created, table.callbacks, nil, table.options)
        case .server: result = nghttp2_session_server_new2(&created, table.callbacks, nil, table.options)
        }
        guard result == 0, let created else {
            throw TransportError.nghttp2(role == .client ? "nghttp2_session_client_new2" : "nghttp2_session_server_new2", Int(result))
        }
        session = created
        nghttp2_session_set_user_data(session, Unmanaged.passUnretained(self).toOpaque())
        var entries = settings.map(\.entry)
        let submitted = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard submitted == 0 else { throw TransportError.nghttp2("nghttp2_submit_settings", Int(submitted)) }
        if let connectionWindow {
            let widened = nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, connectionWindow)
            guard widened == 0 else { throw TransportError.nghttp2("nghttp2_session_set_local_window_size", Int(widened)) }
        }
    }

    deinit {
        nghttp2_session_del(session)
    }

    static func from(_ userData: UnsafeMutableRawPointer) -> HTTP2Session {
        Unmanaged<HTTP2Session>.fromOpaque(userData).takeUnretainedValue()
    }

    // MARK: Input and output

    /// Feeds received bytes; callbacks run inside. Returns nghttp2's error code (< 0) on a protocol
    /// error, else nil.
    @inline(__always)
    public func receive(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let consumed = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        return consumed < 0 ? consumed : nil
    }

    /// The next bytes to send (valid until the next call), empty when there is nothing, or nghttp2's
    /// error code (< 0).
    @inline(__always)
    func nextOutput() -> (bytes: UnsafeRawBufferPointer, error: Int?) {
        var data: UnsafePointer<UInt8>?
        let length = nghttp2_session_mem_send(session, &data)
        if length < 0 { return (UnsafeRawBufferPointer(start: nil, count: 0), length) }
        return (UnsafeRawBufferPointer(start: data, count: length), nil)
    }

    /// Whether nghttp2 has frames to send.
    public var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }
    /// Whether nghttp2 still expects input (false once both sides are done).
    public var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }

    /// The peer's `SETTINGS_MAX_CONCURRENT_STREAMS` (unbounded until its SETTINGS arrive).
    public var remoteMaximumConcurrentStreams: Int {
        Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// Bytes in this side's HPACK encoder table (what the headers it sent added to the dynamic table).
    public var encoderTableSize: Int { Int(nghttp2_session_get_hd_deflate_dynamic_table_size(session)) }

    // MARK: Submitting frames

    /// Client: opens a stream with `headers` and, if `hasBody`, a body read through
    /// ``HTTP2SessionDelegate/http2Body(streamID:into:)``. Returns the stream id (> 0), or nghttp2's
    /// error code (< 0) when the session takes no more streams.
    public func submitRequest(_ headers: inout HTTP2HeaderBlock, hasBody: Bool) -> Int32 {
        headers.withNameValues { nameValues, count in
            guard hasBody else { return nghttp2_submit_request(session, nil, nameValues, count, nil, nil) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2CallbackTable.readBody)
            return nghttp2_submit_request(session, nil, nameValues, count, &provider, nil)
        }
    }

    /// Server: answers `streamID` with `headers` and, if `hasBody`, a body read through the delegate.
    /// Returns nghttp2's error code (< 0), or nil.
    @discardableResult
    public func submitResponse(streamID: Int32, _ headers: inout HTTP2HeaderBlock, hasBody: Bool) -> Int? {
        let result = headers.withNameValues { nameValues, count in
            guard hasBody else { return nghttp2_submit_response(session, streamID, nameValues, count, nil) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2CallbackTable.readBody)
            return nghttp2_submit_response(session, streamID, nameValues, count, &provider)
        }
        return result == 0 ? nil : Int(result)
    }

    /// RST_STREAM with `errorCode` (``HTTP2ErrorCode``).
    public func resetStream(_ streamID: Int32, errorCode: UInt32) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    /// GOAWAY naming `lastStreamID`, the last stream this side will process.
    /// GOAWAY: nothing above `lastStreamID` will be processed. `debugData` travels in the frame (APNs
    /// puts a `{"reason": …}` there).
    public func goAway(lastStreamID: Int32, errorCode: UInt32 = HTTP2ErrorCode.noError, debugData: String = "") {
        var data = Array(debugData.utf8)
        data.withUnsafeMutableBufferPointer { bytes in
            _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, errorCode, bytes.baseAddress, bytes.count)
        }
    }

    /// GOAWAY with the last stream nghttp2 saw, after which the session wants nothing more.
    public func terminate(errorCode: UInt32 = HTTP2ErrorCode.noError) {
        nghttp2_session_terminate_session(session, errorCode)
    }

    /// A PING (the answer arrives as `.ping(ack: true)`).
    public func ping() {
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }
}

/// The nghttp2 callback table and options every session uses (both sides), made once; nghttp2 copies
/// them into each session. Nothing here keeps state: each callback finds its ``HTTP2Session`` through
/// `user_data` and calls the session's delegate.
final class HTTP2CallbackTable: @unchecked Sendable {
    let callbacks: OpaquePointer
    let options: OpaquePointer

    static let shared = HTTP2CallbackTable()

    private init() {
        var callbacks: OpaquePointer?
        var options: OpaquePointer?
        // These fail only when memory is exhausted.
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0 && callbacks != nil, "nghttp2_session_callbacks_new failed")
        precondition(nghttp2_option_new(&options) == 0 && options != nil, "nghttp2_option_new failed")
        self.callbacks = callbacks!
        self.options = options!
        // Closed streams are not kept for the priority tree: 1000 short streams a connection churn fast.
        nghttp2_option_set_no_closed_streams(self.options, 1)

        nghttp2_session_callbacks_set_on_begin_headers_callback(self.callbacks) { _, frame, userData in
            guard let frame, let userData, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
            else { return 0 }
            HTTP2Session.from(userData).delegate.http2RequestBegan(streamID: frame.pointee.hd.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(self.callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let name, let value, let userData else { return 0 }
            HTTP2Session.from(userData).delegate.http2Header(
                streamID: frame.pointee.hd.stream_id,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength)
            )
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(self.callbacks) { _, _, streamID, data, length, userData in
            guard let data, let userData else { return 0 }
            HTTP2Session.from(userData).delegate.http2Data(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(self.callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            HTTP2Session.from(userData).delegate.http2FrameReceived(HTTP2Frame(frame))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(self.callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            HTTP2Session.from(userData).delegate.http2FrameSent(HTTP2Frame(frame))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(self.callbacks) { _, frame, _, userData in
            guard let frame, let userData else { return 0 }
            HTTP2Session.from(userData).delegate.http2FrameNotSent(HTTP2Frame(frame))
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(self.callbacks) { _, streamID, errorCode, userData in
            guard let userData else { return 0 }
            HTTP2Session.from(userData).delegate.http2StreamClosed(streamID: streamID, errorCode: errorCode)
            return 0
        }
    }

    /// Reads a body for nghttp2 (`nghttp2_data_provider.read_callback`).
    static let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
        guard let buffer, let flags, let userData else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        let (count, finished) = HTTP2Session.from(userData).delegate.http2Body(
            streamID: streamID, into: UnsafeMutableBufferPointer(start: buffer, count: length)
        )
        if finished { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }
}

extension HTTP2Frame {
    init(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        let ack = header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
        switch UInt32(header.type) {
        case NGHTTP2_DATA.rawValue: self = .data(streamID: header.stream_id, endStream: endStream)
        case NGHTTP2_HEADERS.rawValue: self = .headers(streamID: header.stream_id, endStream: endStream)
        case NGHTTP2_SETTINGS.rawValue: self = .settings(ack: ack)
        case NGHTTP2_PING.rawValue: self = .ping(ack: ack)
        case NGHTTP2_RST_STREAM.rawValue: self = .resetStream(streamID: header.stream_id, errorCode: frame.pointee.rst_stream.error_code)
        case NGHTTP2_GOAWAY.rawValue:
            let goaway = frame.pointee.goaway
            var debugData = ""
            if goaway.opaque_data_len > 0, let data = goaway.opaque_data {
                debugData = String(decoding: UnsafeBufferPointer(start: data, count: min(goaway.opaque_data_len, 512)), as: UTF8.self)
            }
            self = .goaway(lastStreamID: goaway.last_stream_id, errorCode: goaway.error_code, debugData: debugData)
        default: self = .other(streamID: header.stream_id)
        }
    }
}
