import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a log handler writes its lines: standard output in services, a closure in tests.
///
/// Each line is handed over whole, without its trailing newline.
public struct LogOutput: Sendable {
    private let writeLine: @Sendable (String) -> Void

    /// Hands every line (without the newline) to `write`, e.g. to collect lines in a test.
    public init(_ write: @escaping @Sendable (_ line: String) -> Void) {
        self.writeLine = write
    }

    /// Standard output: one `write(2)` per line (newline included), lines never interleaved.
    public static let standardOutput = LogOutput { line in
        StandardOutputWriter.shared.write(line)
    }

    func write(_ line: String) {
        writeLine(line)
    }
}

/// Writes whole lines to file descriptor 1 under a lock, so lines from many threads never interleave
/// even when a line exceeds the pipe's atomic-write size and takes more than one `write(2)`.
final class StandardOutputWriter: Sendable {
    static let shared = StandardOutputWriter(fileDescriptor: 1)

    private let fileDescriptor: Mutex<Int32>

    init(fileDescriptor: Int32) {
        self.fileDescriptor = Mutex(fileDescriptor)
    }

    func write(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        fileDescriptor.withLock { descriptor in
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = systemWrite(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0, errno == EINTR || errno == EAGAIN {
                        continue
                    } else {
                        return  // stdout is gone; nothing sensible left to do with a log line
                    }
                }
            }
        }
    }
}

private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(descriptor, buffer, count)
    #elseif canImport(Musl)
    Musl.write(descriptor, buffer, count)
    #else
    Darwin.write(descriptor, buffer, count)
    #endif
}
