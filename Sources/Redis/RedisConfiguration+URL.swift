extension RedisConfiguration {
    /// Parses `redis://[[user]:password@]host[:port][/db][?connect_timeout_ms=…&command_timeout_ms=…&pool_size=…]`,
    /// or `redis+cluster://[[user]:password@]host[:port],host[:port],…[/0][?…]` for a Redis Cluster:
    /// the nodes listed are seeds the client learns the whole cluster from (``clusterSeeds``); one
    /// reachable seed is enough, list a few. A cluster has database 0 only.
    ///
    /// Hand-written rather than `URLComponents`, which silently drops an unparsable port and accepts
    /// schemes we cannot serve; each error names the part that is wrong and `source` (where the URL
    /// came from), and never echoes the credentials.
    public init(url: String, source: String = "PUSH_REDIS_URL") throws(RedisError) {
        func fail(_ field: String, _ problem: String, hint: String? = nil) -> RedisError {
            RedisError.invalidURL("\(problem) in \(source)" + (hint.map { " (\($0))" } ?? ""), field: field)
        }

        guard let schemeEnd = url.firstRange(of: "://") else {
            throw fail("scheme", "missing 'redis://'", hint: "expected redis://[:password@]host[:port][/db]")
        }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        let isCluster = scheme == "redis+cluster"
        switch scheme {
        case "redis", "redis+cluster": break
        case "rediss", "rediss+cluster":
            throw fail("scheme", "'rediss://' (TLS) is not supported", hint: "the hiredis 0.14 here is built without SSL; use redis://")
        default:
            throw fail("scheme", "unsupported scheme '\(scheme)'", hint: "expected redis, or redis+cluster for a Redis Cluster")
        }
        // The authority ends at the first '/' or '?' after the last '@', so a raw '/', '?' or '@' in
        // a password stays in the credentials instead of leaking into the path in an error message.
        let afterScheme = url[schemeEnd.upperBound...]
        let hostStart = afterScheme.lastIndex(of: "@").map { afterScheme.index(after: $0) } ?? afterScheme.startIndex
        let authorityEnd = afterScheme[hostStart...].firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
        var authority = afterScheme[..<authorityEnd]
        var path = afterScheme[authorityEnd...]
        var query: Substring = ""
        if let mark = path.firstIndex(of: "?") {
            query = path[path.index(after: mark)...]
            path = path[..<mark]
        }
        if path.hasPrefix("/") { path = path.dropFirst() }

        // Credentials: everything before the last '@' (a password may contain a raw '@').
        var username: String?
        var password: String?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
            guard let colon = userInfo.firstIndex(of: ":") else {
                throw fail("password", "credentials without ':'", hint: "write redis://:PASSWORD@host or redis://USER:PASSWORD@host")
            }
            guard let user = Self.percentDecoded(userInfo[..<colon]) else {
                throw fail("username", "invalid percent-encoding in the user name")
            }
            guard let secret = Self.percentDecoded(userInfo[userInfo.index(after: colon)...]) else {
                throw fail("password", "invalid percent-encoding in the password")
            }
            guard !secret.isEmpty else {
                throw fail("password", "empty password after ':'")
            }
            username = user.isEmpty ? nil : user
            password = secret
        }

        var endpoints: [RedisEndpoint] = []
        for entry in authority.split(separator: ",", omittingEmptySubsequences: false) {
            guard isCluster || endpoints.isEmpty else {
                throw fail("host", "several hosts in a redis:// URL", hint: "a Redis Cluster is redis+cluster://host1:port,host2:port,…")
            }
            guard !entry.isEmpty || !isCluster else { throw fail("host", "an empty host in the list (two commas, or one at an end)") }
            endpoints.append(try Self.endpoint(entry, fail: fail))
        }
        if isCluster {
            let repeated = Dictionary(grouping: endpoints, by: \.self).first { $0.value.count > 1 }?.key
            if let repeated { throw fail("host", "\(repeated) is listed twice") }
        }
        var database = 0
        if !path.isEmpty {
            guard let value = Self.decimal(path), value <= Int(Int32.max) else {
                throw fail("db", "invalid database '\(path)'", hint: "expected a number such as /0")
            }
            database = value
        }

        if isCluster, database != 0 {
            throw fail("db", "database \(database) in a Redis Cluster URL", hint: "a cluster has database 0 only; write /0 or nothing")
        }
        self.init(host: endpoints[0].host, port: endpoints[0].port, database: database, username: username, password: password)
        if isCluster { self.clusterSeeds = endpoints }

        for item in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let value = parts.count > 1 ? parts[1] : ""
            func positive(max: Int) throws(RedisError) -> Int {
                guard let number = Self.decimal(value), (1...max).contains(number) else {
                    throw fail(name, "invalid \(name) '\(value)'", hint: "expected a whole number in 1–\(max)")
                }
                return number
            }
            switch name {
            case "connect_timeout_ms": self.connectTimeout = .milliseconds(try positive(max: 3_600_000))
            case "command_timeout_ms": self.commandTimeout = .milliseconds(try positive(max: 3_600_000))
            case "pool_size": self.poolSize = try positive(max: 64)
            default:
                throw fail(name, "unknown option '\(name)'", hint: "known: connect_timeout_ms, command_timeout_ms, pool_size")
            }
        }
    }

    /// One `host[:port]`: a name, an IPv4 address or a bracketed IPv6 address, and a port
    /// (default 6379).
    private static func endpoint(
        _ authority: Substring, fail: (String, String, String?) -> RedisError
    ) throws(RedisError) -> RedisEndpoint {
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw fail("host", "unterminated '[' in the IPv6 host", nil)
            }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("host", "unexpected '\(after)' after the IPv6 host", nil) }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw fail("host", "invalid IPv6 host '\(host)'", nil)
            }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                host = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                host = authority
            }
            guard !host.isEmpty else { throw fail("host", "missing host", nil) }
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") }) else {
                throw fail("host", "invalid host '\(host)'", nil)
            }
        }
        var port = RedisConfiguration.defaultPort
        if let portText {
            guard let value = Self.decimal(portText), (1...65535).contains(value) else {
                throw fail("port", "invalid port '\(portText)'", "expected 1–65535")
            }
            port = value
        }
        return RedisEndpoint(host: String(host), port: port)
    }

    /// A non-negative decimal made of ASCII digits only (no sign, no spaces), or nil.
    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    /// `%XX` sequences decoded as UTF-8; nil when a `%` is not followed by two hex digits or the
    /// result is not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
