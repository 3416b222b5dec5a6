import Foundation
import FuzzSupport
import PushCore

/// The apps file (`PUSH_APPS_FILE`, CONTRACT.md "Apps file"): decoding and every rule between apps.
///
/// Invariant: every app of an accepted file validates on its own and is found by its bundle id and
/// display names.
@main
enum FuzzAppsFile {
    static func main() { FuzzDriver.run(fuzzAppsFile) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAppsFile(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = FuzzFixtures.bytes(start, count)
    let file: AppsFile
    do {
        file = try AppsFile(json: Data(bytes), directory: "/etc/push")
    } catch {
        return FuzzFixtures.refused(error)
    }
    FuzzFixtures.accepted("apps \(file.apps.keys.sorted())")
    for app in file.apps.values {
        guard (try? app.validate()) != nil, file.app(bundleID: app.bundleID) == app else {
            FuzzFixtures.violated("accepted app \(app.bundleID) does not validate or is not found")
        }
        for name in app.displayNames where file.app(named: name)?.bundleID != app.bundleID {
            FuzzFixtures.violated("display name \(name) of \(app.bundleID) finds another app")
        }
    }
    _ = file.appForLegacyRegistration(appName: "Example Game")
    return 0
}
