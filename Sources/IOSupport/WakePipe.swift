import Glibc

/// A self-pipe that wakes a thread blocked in `poll`: both ends non-blocking and close-on-exec, owned
/// and closed here. Any thread may ``wake()``; the polling thread ``drain()``s after a wake-up.
public final class WakePipe: Sendable {
    /// The descriptor the sleeping thread polls for `POLLIN`.
    public let readEnd: Int32
    private let writeEnd: Int32

    public init() throws(SystemCallError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SystemCallError("pipe") }
        readEnd = ends[0]
        writeEnd = ends[1]
        for descriptor in ends {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Makes the read end readable (a full pipe already is, so a failed write is fine).
    public func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the pipe after a wake-up.
    public func drain() {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &bytes) { buffer in
            for _ in 0..<16 where read(readEnd, buffer.baseAddress, buffer.count) == buffer.count {}
        }
    }
}

/// A system call failed: which, and `errno`'s text.
public struct SystemCallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call (or what was being done).
    public let call: String
    public let errno: Int32

    public init(_ call: String, errno number: Int32 = Glibc.errno) {
        self.call = call
        self.errno = number
    }

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}
