/// One Redis command as an argument vector: binary-safe, never a format string.
///
/// The arguments are kept back to back in one byte array with their end offsets, so building a command
/// costs two allocations however many arguments it has, and the connection thread can point hiredis at
/// them without copying (`redisAppendCommandArgv`). That keeps the pipelined path cheap.
///
///     var command: RedisCommand = ["SET", key]
///     command.append(valueBytes)
///     command.append("EX"); command.append(60)
public struct RedisCommand: Sendable, Hashable, ExpressibleByArrayLiteral, CustomStringConvertible {
    /// All arguments, concatenated.
    private(set) var storage: [UInt8]
    /// `ends[i]` is the offset in ``storage`` just past argument `i`.
    private(set) var ends: [Int]
    /// The key a Redis Cluster client routes a keyless command by (``routed(byKey:)``).
    var routingOverride: [UInt8]?

    public init() {
        storage = []
        ends = []
    }

    public init(_ arguments: [String]) {
        storage = []
        storage.reserveCapacity(arguments.reduce(0) { $0 + $1.utf8.count })
        ends = []
        ends.reserveCapacity(arguments.count)
        for argument in arguments { append(argument) }
    }

    public init(_ arguments: String...) {
        self.init(arguments)
    }

    public init(arrayLiteral arguments: String...) {
        self.init(arguments)
    }

    /// Arguments given as raw bytes (keys and values that are not text).
    public init(_ arguments: [[UInt8]]) {
        storage = []
        storage.reserveCapacity(arguments.reduce(0) { $0 + $1.count })
        ends = []
        ends.reserveCapacity(arguments.count)
        for argument in arguments { append(argument) }
    }

    public mutating func append(_ argument: String) {
        storage.append(contentsOf: argument.utf8)
        ends.append(storage.count)
    }

    /// Appends raw bytes as one argument; any byte value, including 0, `\r` and `\n`, is fine.
    public mutating func append(_ argument: some Sequence<UInt8>) {
        storage.append(contentsOf: argument)
        ends.append(storage.count)
    }

    /// Appends an integer as its decimal text, as Redis expects (`EXPIRE key 60`).
    public mutating func append(_ argument: some BinaryInteger) {
        append(String(argument))
    }

    /// Appends several arguments.
    public mutating func append(contentsOf arguments: [String]) {
        for argument in arguments { append(argument) }
    }

    /// Appends several raw-byte arguments.
    public mutating func append(contentsOf arguments: [[UInt8]]) {
        for argument in arguments { append(argument) }
    }

    /// The number of arguments, including the command name.
    public var count: Int { ends.count }

    /// The arguments, copied out (for tests and debugging; the send path never copies).
    public var arguments: [[UInt8]] {
        var start = 0
        return ends.map { end in
            defer { start = end }
            return Array(storage[start..<end])
        }
    }

    /// The command name (the first argument), uppercased, or "" for an empty command.
    public var name: String {
        guard let end = ends.first else { return "" }
        return String(decoding: storage[0..<end], as: UTF8.self).uppercased()
    }

    /// Only the name and the argument count: arguments may be secrets (`AUTH`) or personal data.
    public var description: String { "\(name) (\(count) arguments)" }
}
