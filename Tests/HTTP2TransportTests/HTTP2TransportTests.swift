import Foundation
import Glibc
import Testing

@testable import HTTP2Transport

/// The transport on its own: TLS contexts and their errors, and one request and answer between a
/// client and a server session over a socket pair, driven step by step on one thread (no port, no
/// thread, no APNs logic).
@Suite("HTTP/2 transport")
struct HTTP2TransportTests {
    @Test func clientContextErrorsNameTheFile() {
        #expect(throws: TransportError.self) { try TLSContext.client(trusting: "/nonexistent/ca.pem", identity: nil) }
        do {
            _ = try TLSContext.client(trusting: nil, identity: .pem(certificateFile: "/nonexistent/c.pem", privateKeyFile: "/nonexistent/k.pem"))
            Issue.record("a missing certificate file is an error")
        } catch {
            #expect(error.kind == .certificate)
            #expect(error.message.contains("cannot read '/nonexistent/c.pem'"), "\(error)")
        }
    }

    @Test func generatedAuthorityIsPEM() throws {
        let identity = try GeneratedTLSIdentity()
        #expect(try identity.authority.pemString().hasPrefix("-----BEGIN CERTIFICATE-----"))
        _ = try TLSContext.server(identity: .generated(identity), clientCAFile: nil)
    }

    @Test func headerBlockPacksFields() {
        var block = HTTP2HeaderBlock(bytes: 8, fields: 1)
        block.add(":status", "200")
        block.add("apns-id", "x")
        // Grows past its reserved capacity without losing a field.
        for index in 0..<20 { block.add("x-\(index)", String(repeating: "v", count: index)) }
        #expect(block.count == 22)
    }

    @Test func headerBlockIsRefilledAndWritesJoinedAndDecimalValues() {
        var block = HTTP2HeaderBlock(bytes: 4, fields: 1)
        block.add(":path", "/3/device/", "abc")
        block.add("content-length", decimal: 89)
        block.add("zero", decimal: 0)
        block.add("negative", decimal: -1205)
        block.add("largest", decimal: Int.max)
        block.add("smallest", decimal: Int.min)
        #expect(block.fields.map(\.name) == [":path", "content-length", "zero", "negative", "largest", "smallest"])
        #expect(
            block.fields.map(\.value) == ["/3/device/abc", "89", "0", "-1205", "\(Int.max)", "\(Int.min)"]
        )
        block.removeAll()
        #expect(block.count == 0)
        block.add("apns-id", "x")
        #expect(block.fields.map(\.name) == ["apns-id"])
        #expect(block.fields.map(\.value) == ["x"])
    }

    @Test func oneRequestAndItsAnswerOverASocketPair() throws {
        let pair = try SessionPair()
        defer { pair.close() }
        let (clientPipe, client, server) = (pair.clientPipe, pair.client, pair.server)
        var request = HTTP2HeaderBlock()
        for (name, value) in [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abc"), (":authority", "localhost")] {
            request.add(name, value)
        }
        client.body = Array(#"{"aps":{}}"#.utf8)
        let streamID = clientPipe.session.submitRequest(&request, hasBody: true)
        #expect(streamID == 1)
        pair.pump { client.status != nil }
        #expect(server.receivedBody == client.body)
        #expect(client.status == "200")
        #expect(client.closedStreams == [1])
        #expect(clientPipe.session.remoteMaximumConcurrentStreams == 10)
    }

    /// Fields added with `indexed: false` stay out of the HPACK encoder's table: a hundred requests
    /// with a new id each leave it as the first left it. The same ids indexed fill it (the control).
    @Test(arguments: [false, true])
    func unindexedFieldsDoNotGrowTheEncoderTable(indexed: Bool) throws {
        let pair = try SessionPair()
        defer { pair.close() }
        var sizes: [Int] = []
        pair.client.body = Array("{}".utf8)
        for index in 0..<100 {
            var request = HTTP2HeaderBlock()
            for (name, value) in [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/abc"), (":authority", "localhost")] {
                request.add(name, value)
            }
            request.add("apns-id", "00000000-0000-0000-0000-\(String(100_000_000_000 + index))", indexed: indexed)
            request.add("apns-expiration", decimal: 1_767_225_600 + index, indexed: indexed)
            pair.client.status = nil
            pair.client.sent = 0
            _ = pair.clientPipe.session.submitRequest(&request, hasBody: true)
            pair.pump { pair.client.status != nil }
            #expect(pair.client.status == "200")
            sizes.append(pair.clientPipe.session.encoderTableSize)
        }
        if indexed {
            #expect(sizes.last! > sizes.first!, "indexed ids enter the table: \(sizes.first!) → \(sizes.last!) bytes")
        } else {
            #expect(Set(sizes).count == 1, "the table stays at \(sizes.first!) bytes: \(Set(sizes).sorted())")
        }
    }
}

/// A client and a server session over a socket pair with TLS, driven step by step on one thread.
private struct SessionPair {
    let clientPipe: HTTP2OverTLS
    let serverPipe: HTTP2OverTLS
    let client = RecordingClient()
    let server = EchoServer()
    private let caFile: String
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)

    init() throws {
        let identity = try GeneratedTLSIdentity()
        caFile =
            FileManager.default.temporaryDirectory.appendingPathComponent("transport-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-ca.pem")
            .path
        try identity.authority.pemString().write(toFile: caFile, atomically: true, encoding: .utf8)
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        for descriptor in ends { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }

        let clientTLS = try TLSStream(
            context: try TLSContext.client(trusting: caFile, identity: nil), fd: ends[0], role: .client(host: "localhost"))
        let serverTLS = try TLSStream(context: try TLSContext.server(identity: .generated(identity), clientCAFile: nil), fd: ends[1], role: .server)
        var clientDone = false
        var serverDone = false
        for _ in 0..<200 where !(clientDone && serverDone) {
            if !clientDone, case .done = clientTLS.handshakeStep() { clientDone = true }
            if !serverDone, case .done = serverTLS.handshakeStep() { serverDone = true }
        }
        #expect(clientDone && serverDone)
        #expect(clientTLS.negotiatedHTTP2 && serverTLS.negotiatedHTTP2)
        serverPipe = HTTP2OverTLS(
            tls: serverTLS, session: try HTTP2Session(role: .server, delegate: server, settings: [.maximumConcurrentStreams(10)]))
        server.session = serverPipe.session
        clientPipe = HTTP2OverTLS(tls: clientTLS, session: try HTTP2Session(role: .client, delegate: client, settings: [.enablePush(false)]))
    }

    /// Moves bytes both ways until `done` (at most 100 rounds).
    func pump(until done: () -> Bool) {
        for _ in 0..<100 where !done() {
            for outcome in [clientPipe.flush(), serverPipe.flush()] where outcome != .finished && outcome != .blocked {
                Issue.record("flush: \(outcome)")
            }
            for outcome in [
                serverPipe.readAvailable(into: buffer, maximumReads: 8) { false }, clientPipe.readAvailable(into: buffer, maximumReads: 8) { false },
            ]
            where outcome != .drained {
                Issue.record("read: \(outcome)")
            }
        }
    }

    func close() {
        clientPipe.tls.close()
        serverPipe.tls.close()
        buffer.deallocate()
        unlink(caFile)
    }
}

/// Answers every request with 200 once its body is complete.
private final class EchoServer: HTTP2SessionDelegate {
    var session: HTTP2Session?
    var receivedBody: [UInt8] = []

    func http2Header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {}
    func http2Data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) { receivedBody.append(contentsOf: bytes) }
    func http2FrameReceived(_ frame: HTTP2Frame) {
        if case .data(let streamID, endStream: true) = frame {
            var headers = HTTP2HeaderBlock()
            headers.add(":status", "200")
            session?.submitResponse(streamID: streamID, &headers, hasBody: false)
        }
    }
    func http2StreamClosed(streamID: Int32, errorCode: UInt32) {}
    func http2Body(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> (count: Int, finished: Bool) { (0, true) }
}

/// Sends `body` and records the answer.
private final class RecordingClient: HTTP2SessionDelegate {
    var body: [UInt8] = []
    var sent = 0
    var status: String?
    var closedStreams: [Int32] = []

    func http2Header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        if name.elementsEqual(":status".utf8) { status = String(decoding: value, as: UTF8.self) }
    }
    func http2Data(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {}
    func http2FrameReceived(_ frame: HTTP2Frame) {}
    func http2StreamClosed(streamID: Int32, errorCode: UInt32) { closedStreams.append(streamID) }
    func http2Body(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> (count: Int, finished: Bool) {
        let count = min(buffer.count, body.count - sent)
        for index in 0..<count { buffer[index] = body[sent + index] }
        sent += count
        return (count, sent == body.count)
    }
}
