import Testing

@testable import Redis

@Suite("RedisReply conversion from hiredis replies")
struct RedisReplyTests {
    private func parse(_ resp: String) throws -> [RedisReply] {
        try RedisReply.parse(Array(resp.utf8))
    }

    @Test func scalars() throws {
        #expect(try parse("+OK\r\n") == [.status("OK")])
        #expect(try parse("-ERR unknown command\r\n") == [.error("ERR unknown command")])
        #expect(try parse(":-42\r\n") == [.integer(-42)])
        #expect(try parse(":9223372036854775807\r\n") == [.integer(.max)])
        #expect(try parse("$5\r\nhello\r\n") == [.bulk(Array("hello".utf8))])
        #expect(try parse("$0\r\n\r\n") == [.bulk([])])
        #expect(try parse("$-1\r\n") == [.null])
        #expect(try parse("*-1\r\n") == [.null])
        #expect(try parse("*0\r\n") == [.array([])])
    }

    @Test func bulkStringsAreBinarySafe() throws {
        let bytes: [UInt8] = [0, 13, 10, 255, 36]
        let resp = Array("$5\r\n".utf8) + bytes + Array("\r\n".utf8)
        #expect(try RedisReply.parse(resp) == [.bulk(bytes)])
    }

    @Test func nestedArraysWithNils() throws {
        let replies = try parse("*3\r\n:1\r\n*2\r\n$1\r\nx\r\n*1\r\n$-1\r\n$-1\r\n")
        #expect(replies == [.array([.integer(1), .array([.bulk([UInt8(ascii: "x")]), .array([.null])]), .null])])
    }

    @Test func severalRepliesInOneBuffer() throws {
        #expect(try parse("+A\r\n:1\r\n$1\r\nb\r\n") == [.status("A"), .integer(1), .bulk([UInt8(ascii: "b")])])
        // An incomplete trailing reply is left for more input.
        #expect(try parse("+A\r\n$10\r\nabc") == [.status("A")])
    }

    @Test func garbageIsAProtocolError() {
        let error = #expect(throws: RedisError.self) { try parse("?what\r\n") }
        #expect(error?.code == .protocolError)
    }

    @Test func accessors() throws {
        #expect(RedisReply.bulk(Array("héllo".utf8)).string == "héllo")
        #expect(RedisReply.status("PONG").string == "PONG")
        #expect(RedisReply.integer(3).string == nil)
        #expect(RedisReply.bulk(Array("17".utf8)).integer == 17)
        #expect(RedisReply.integer(5).integer == 5)
        #expect(RedisReply.null.isNull)
        #expect(RedisReply.array([.null]).array == [.null])
        #expect(RedisReply.error("ERR x").errorMessage == "ERR x")
        #expect(try RedisReply.integer(1).throwingServerError() == .integer(1))
        let error = #expect(throws: RedisError.self) { try RedisReply.error("WRONGTYPE bad").throwingServerError() }
        #expect(error?.code == .serverError)
        #expect(error?.message == "WRONGTYPE bad")
    }
}

@Suite("RedisCommand")
struct RedisCommandTests {
    @Test func argumentsKeepTheirBoundaries() {
        var command: RedisCommand = ["SET", "key", ""]
        command.append([0, 13, 10] as [UInt8])
        command.append(-12)
        #expect(command.count == 5)
        #expect(command.arguments == [Array("SET".utf8), Array("key".utf8), [], [0, 13, 10], Array("-12".utf8)])
        #expect(command.name == "SET")
    }

    @Test func descriptionHidesArguments() {
        let command = RedisCommand("auth", "user", "secret")
        #expect(command.description == "AUTH (3 arguments)")
        #expect(RedisCommand([[1, 2], [3]]).arguments == [[1, 2], [3]])
    }
}
