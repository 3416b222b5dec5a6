import Glibc

/// A self-pipe that wakes a thread blocked in `poll`; both descriptors owned and closed here.
final class WakePipe: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    init() throws(SandboxError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SandboxError.posix(.socket, "pipe") }
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

    /// Makes the read end readable (a full pipe is already readable, so a failed write is fine).
    func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the pipe after a wake-up.
    func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        for _ in 0..<16 where read(readEnd, &bytes, bytes.count) == bytes.count {}
    }
}
