/// The server's localisation catalogs (`localization/<locale>.strings`) and the locale fallback
/// chain used to look keys up for a device.
///
/// Locales are matched case-insensitively with `_` and `-` alike, so `zh_Hant_TW`, `zh-Hant-TW` and
/// `zh-hant-tw` are one locale; `@…` and `.…` suffixes (`en_US.UTF-8`, `sr@latin`) are ignored.
///
/// The chain of a device locale is the locale, then the locale with its last subtag removed, and so
/// on, then the default locale: `zh-Hant-TW` → `zh-Hant` → `zh` → `en`. Chinese locales that name a
/// region but no script also try the script the region writes: `zh-TW`, `zh-HK`, `zh-MO` → `zh-Hant`;
/// `zh-CN`, `zh-SG` → `zh-Hans`. Only locales that have a catalog are kept in the chain.
public struct LocalizationCatalogs: Sendable, Equatable {
    /// Catalogs by canonical locale (lowercase, `-`-separated: `zh-hant`).
    public let catalogs: [String: StringsCatalog]
    /// The last step of every chain, canonical; `en` unless configured otherwise.
    public let defaultLocale: String

    /// - Parameter catalogs: by locale as written (file names without `.strings`), any spelling.
    public init(catalogs: [String: StringsCatalog], defaultLocale: String = "en") {
        var canonicalCatalogs: [String: StringsCatalog] = [:]
        for (locale, catalog) in catalogs {
            canonicalCatalogs[Self.canonical(locale)] = catalog
        }
        self.catalogs = canonicalCatalogs
        self.defaultLocale = Self.canonical(defaultLocale)
    }

    /// No catalogs: every key falls back to the device.
    public static let empty = LocalizationCatalogs(catalogs: [:])

    /// `zh_Hant_TW.UTF-8` → `zh-hant-tw`.
    public static func canonical(_ locale: String) -> String {
        var text = Substring(locale)
        if let cut = text.firstIndex(where: { $0 == "@" || $0 == "." }) { text = text[..<cut] }
        return String(text.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// The catalogs to try for a device with `locale`, most specific first (canonical names).
    public func chain(for locale: String?) -> [String] {
        var candidates: [String] = []
        if let locale {
            let subtags = Self.canonical(locale).split(separator: "-").map(String.init).filter { !$0.isEmpty }
            if !subtags.isEmpty {
                for length in stride(from: subtags.count, through: 1, by: -1) {
                    candidates.append(subtags[0..<length].joined(separator: "-"))
                }
                if subtags[0] == "zh", subtags.count >= 2, subtags[1].count == 2 {
                    let script: String? =
                        switch subtags[1] {
                        case "tw", "hk", "mo": "zh-hant"
                        case "cn", "sg": "zh-hans"
                        default: nil
                        }
                    if let script { candidates.insert(script, at: candidates.count - 1) }
                }
            }
        }
        candidates.append(defaultLocale)
        var seen: Set<String> = []
        return candidates.filter { catalogs[$0] != nil && seen.insert($0).inserted }
    }

    /// The first string for `key` along `chain`, with the locale it came from.
    public func lookup(_ key: String, chain: [String]) -> (text: String, locale: String)? {
        for locale in chain {
            if let text = catalogs[locale]?[key] { return (text, locale) }
        }
        return nil
    }
}
