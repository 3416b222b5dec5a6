import CHiredis
import CNghttp2
import COpenSSL
import CRabbitMQ
import Testing

/// The system libraries link, are new enough, and the shims for macros and variadic functions work.
@Suite struct SystemLibraryTests {
    @Test func rabbitmqCIsAtLeast0_11() {
        let version = String(cString: amqp_version())
        let parts = version.split(separator: ".").compactMap { Int($0.prefix { $0.isNumber }) }
        #expect(parts.count >= 2)
        #expect(parts[0] > 0 || parts[1] >= 11, "rabbitmq-c \(version)")
        // A shimmed cast macro: the method id of basic.ack (class 60, method 80).
        #expect(push_amqp_basic_ack_method == 0x003C_0050)
    }

    @Test func hiredisParsesARESPReply() throws {
        let reader = try #require(redisReaderCreate())
        defer { redisReaderFree(reader) }
        let resp = Array("*2\r\n$3\r\nfoo\r\n:42\r\n".utf8)
        resp.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { _ = redisReaderFeed(reader, $0.baseAddress, $0.count) }
        }
        var reply: UnsafeMutableRawPointer?
        #expect(redisReaderGetReply(reader, &reply) == REDIS_OK)
        let parsed = try #require(reply?.assumingMemoryBound(to: redisReply.self))
        defer { freeReplyObject(reply) }
        #expect(parsed.pointee.type == REDIS_REPLY_ARRAY)
        #expect(parsed.pointee.elements == 2)
        #expect(parsed.pointee.element[1]!.pointee.integer == 42)
    }

    @Test func nghttp2IsAtLeast1_40() {
        let info = nghttp2_version(0)!.pointee
        #expect(info.version_num >= 0x01_28_00, "nghttp2 \(String(cString: info.version_str))")
        #expect(String(cString: info.proto_str) == "h2")
    }

    @Test func openSSLShimsSetSNIAndTheMinimumVersion() throws {
        #expect(OpenSSL_version_num() >= 0x3000_0000)
        let context = try #require(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(context) }
        #expect(push_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1)
        let ssl = try #require(SSL_new(context))
        defer { SSL_free(ssl) }
        #expect(push_SSL_set_tlsext_host_name(ssl, "api.push.apple.com") == 1)
        #expect(String(cString: SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)) == "api.push.apple.com")
    }
}
