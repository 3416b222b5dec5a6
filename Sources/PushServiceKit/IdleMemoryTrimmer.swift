import Glibc
public import ServiceLifecycle

/// Gives the memory a burst of work left behind back to the system once the process goes idle.
///
/// glibc's allocator keeps freed memory in its arenas: after a broadcast push-send held 144 MB
/// resident while idle, with 37 MB in use before it. Every ``interval`` this service reads the
/// process's CPU time; when a busy stretch is followed by an idle one (``IdleTrimPolicy``) it calls
/// `malloc_trim(0)` once. It never trims while the process works, so it costs nothing under load.
public struct IdleMemoryTrimmer: Service {
    public let interval: Duration
    private let trim: @Sendable () -> Void
    private let cpuTime: @Sendable () -> Duration

    /// - Parameters:
    ///   - trim: what to do when the process goes idle after work (`malloc_trim(0)`).
    ///   - cpuTime: the CPU time used so far; the whole process's by default. Tests pass their own,
    ///     since a test process shares its CPU time with every other test running beside it.
    public init(
        interval: Duration = .seconds(5),
        trim: @escaping @Sendable () -> Void = IdleMemoryTrimmer.mallocTrim,
        cpuTime: @escaping @Sendable () -> Duration = IdleMemoryTrimmer.processCPUTime
    ) {
        self.interval = interval
        self.trim = trim
        self.cpuTime = cpuTime
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var policy = IdleTrimPolicy()
            var last = cpuTime()
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                let now = cpuTime()
                if policy.shouldTrim(cpuUsed: now - last, over: interval) { trim() }
                last = now
            }
        }
    }

    /// glibc's `malloc_trim(0)`, found at run time (Swift's Glibc module does not export it); a no-op
    /// with another C library.
    public static let mallocTrim: @Sendable () -> Void = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return {} }
        let function = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        return { _ = function(0) }
    }()

    /// CPU time the whole process used so far: C's `clock()`, in microseconds on POSIX (a 64-bit
    /// `clock_t` on Linux, so it does not wrap). Not `clock_gettime`: its `timespec` is ambiguous
    /// between Glibc and Dispatch here, depending on what else the module imports.
    @Sendable public static func processCPUTime() -> Duration {
        .microseconds(Int64(clock()))
    }
}

/// When to trim: after an interval below ``idleShare`` of one core that follows work (an interval at
/// or above it), once per idle stretch. Pure, so it is tested without a process.
public struct IdleTrimPolicy: Sendable, Equatable {
    /// Below this share of one core an interval counts as idle (1%, the services' idle target).
    public static let idleShare = 0.01
    /// Whether there was work since the last trim.
    private var worked = false

    public init() {}

    public mutating func shouldTrim(cpuUsed: Duration, over interval: Duration) -> Bool {
        let share = Self.seconds(cpuUsed) / max(Self.seconds(interval), 0.001)
        if share >= Self.idleShare {
            worked = true
            return false
        }
        defer { worked = false }
        return worked
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
