import Foundation
import Logging

/// The loggers the tests hand to the code under test: silent by default, so a passing run prints only
/// the test results, and readable on demand when a test fails.
///
/// One switch for every suite: `PUSH_TEST_LOG`. Unset: nothing is logged. Set to a level name
/// (`trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`): that level and above. Set to
/// anything else (`PUSH_TEST_LOG=1`, as the suites have always read it): `debug` and above.
public enum TestLogger {
    /// A logger labelled `label` that follows `PUSH_TEST_LOG`.
    public static func make(_ label: String) -> Logger {
        guard let level = level else {
            return Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() })
        }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    /// The level `PUSH_TEST_LOG` asks for, or nil (silent) when it is not set.
    static var level: Logger.Level? {
        guard let value = ProcessInfo.processInfo.environment["PUSH_TEST_LOG"] else { return nil }
        return Logger.Level(rawValue: value.lowercased()) ?? .debug
    }
}
