import FuzzSupport
import PushCore

/// A `<locale>.strings` catalog (push-render's `PUSH_LOCALIZATION_DIR`): the parser, then every value
/// used as a format with `loc-args` as push requests send them.
@main
enum FuzzStringsCatalog {
    static func main() { FuzzDriver.run(fuzzStringsCatalog) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStringsCatalog(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = FuzzFixtures.bytes(start, count)
    let catalog: StringsCatalog
    do {
        catalog = try StringsCatalog(data: bytes, name: "fuzz.strings")
    } catch {
        return FuzzFixtures.refused(error)
    }
    FuzzFixtures.accepted("\(catalog.strings.count) strings")
    for format in catalog.strings.values.prefix(64) {
        for arguments in [[], ["Jenna", "Frank"], ["1", "%@", "%2$@", "-7"]] {
            _ = try? LocalizedFormat.format(format, arguments: arguments)
        }
    }
    let catalogs = LocalizationCatalogs(catalogs: ["fz": catalog], defaultLocale: "fz")
    for key in catalog.strings.keys.prefix(64) where catalogs.lookup(key, chain: ["fz"])?.text != catalog[key] {
        FuzzFixtures.violated("lookup of \(key) does not find its value")
    }
    return 0
}
