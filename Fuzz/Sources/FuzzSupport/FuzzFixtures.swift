import CLibFuzzer
import Foundation
public import PushCore

/// The `main` of every fuzz target: libFuzzer's driver over `test`, with the command line's flags
/// (`-max_total_time=10`, a corpus directory, a crash input to replay, …).
public enum FuzzDriver {
    /// `test` gets each input (`data` may be nil when `count` is 0) and returns 0.
    public static func run(_ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, test))
    }
}

/// What every fuzz target shares: the apps file and catalogs the decoders are checked against, and
/// the input as bytes. The fixtures are the repository's own (`config/apps.json` plus apps that
/// switch on what the example app leaves off, `localization/*.strings`), read once at start.
public enum FuzzFixtures {
    /// The repository root, found from this file's path (the fuzz binaries run from any directory).
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `config/apps.json`'s app (the default, `md5` credentials) plus `com.example.shop` (`hmac-sha256`
    /// with a secret, `push_token`, a display name), so both credential checks and both legacy app
    /// lookups (by name, falling back to the default) are reached.
    public static let apps: AppsFile = {
        let file = root.appendingPathComponent("config/apps.json")
        guard let data = try? Data(contentsOf: file) else { fatalError("FuzzFixtures: cannot read \(file.path)") }
        let example: AppsFile
        do {
            example = try AppsFile(json: data)
        } catch {
            fatalError("FuzzFixtures: \(file.path): \(error)")
        }
        var apps = Array(example.apps.values)
        var hmac = AppConfiguration(bundleID: "com.example.shop", apns: apps[0].apns)
        hmac.displayNames = ["Example Shop"]
        hmac.ingest = .init(apiKeys: ["shop-key"], credential: .hmacSHA256, secret: "fuzz-secret", pushToken: true)
        apps.append(hmac)
        do {
            return try AppsFile(apps: apps)
        } catch {
            fatalError("FuzzFixtures: the extra apps are invalid: \(error)")
        }
    }()

    /// The catalogs of `localization/` (en, de, zh-Hant), as push-render loads them.
    public static let catalogs: LocalizationCatalogs = {
        let directory = root.appendingPathComponent("localization")
        var catalogs: [String: StringsCatalog] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasSuffix(".strings") {
            guard let data = try? Data(contentsOf: directory.appendingPathComponent(name)) else { continue }
            do {
                catalogs[String(name.dropLast(".strings".count))] = try StringsCatalog(data: Array(data), name: name)
            } catch {
                fatalError("FuzzFixtures: localization/\(name): \(error)")
            }
        }
        if catalogs.isEmpty { fatalError("FuzzFixtures: no catalogs in \(directory.path)") }
        return LocalizationCatalogs(catalogs: catalogs)
    }()

    /// A fixed clock for decisions that compare with now (2026-01-01T00:00:00Z, ms).
    public static let nowMilliseconds: Int64 = 1_767_225_600_000

    /// libFuzzer's input as an array.
    public static func bytes(_ start: UnsafePointer<UInt8>?, _ count: Int) -> [UInt8] {
        guard let start, count > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: start, count: count))
    }

    /// With `FUZZ_EXPLAIN=1` in the environment, the targets say what they made of each input
    /// (`FUZZ_EXPLAIN=1 fuzz-push-request FILE…` replays files): whether the seeds are accepted, why a
    /// mutation was refused.
    public static let explains = ProcessInfo.processInfo.environment["FUZZ_EXPLAIN"] == "1"

    /// Returns 0 (the input is done), first printing `why` when ``explains``.
    public static func refused(_ why: Any) -> CInt {
        if explains { FileHandle.standardError.write(Data("refused: \(why)\n".utf8)) }
        return 0
    }

    /// Prints `what` when ``explains``.
    public static func accepted(_ what: @autoclosure () -> String) {
        if explains { FileHandle.standardError.write(Data("accepted: \(what())\n".utf8)) }
    }

    /// Stops the run with `message`: libFuzzer saves the input as a crash. For broken invariants
    /// (a decoder that accepted what it must refuse, two decoders that disagree).
    public static func violated(_ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        fatalError("invariant violated: \(message())", file: file, line: line)
    }
}
