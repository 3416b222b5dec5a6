import Foundation
public import PushCore

extension LocalizationCatalogs {
    /// Reads every `<locale>.strings` file in `directory` (other files are ignored).
    ///
    /// A missing directory gives no catalogs (every key then falls back to the device; the caller
    /// logs it). A file that cannot be read or parsed stops the service at start.
    ///
    /// - Throws: ``LocalizationLoadingError`` naming the file and line.
    public static func load(directory: String, defaultLocale: String = "en") throws(LocalizationLoadingError) -> LocalizationCatalogs {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            return LocalizationCatalogs(catalogs: [:], defaultLocale: defaultLocale)
        }
        guard isDirectory.boolValue else {
            throw LocalizationLoadingError("PUSH_LOCALIZATION_DIR: \(directory) is not a directory")
        }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw LocalizationLoadingError("PUSH_LOCALIZATION_DIR: \(directory) cannot be listed: \(error.localizedDescription)")
        }
        var catalogs: [String: StringsCatalog] = [:]
        var seen: [String: String] = [:]
        for name in names.sorted() where name.hasSuffix(".strings") {
            let locale = String(name.dropLast(".strings".count))
            guard !locale.isEmpty else { continue }
            let path = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw LocalizationLoadingError("\(path) cannot be read")
            }
            let canonical = LocalizationCatalogs.canonical(locale)
            if let other = seen[canonical] {
                throw LocalizationLoadingError("\(path) and \(other) are the same locale (\(canonical))")
            }
            seen[canonical] = name
            do {
                catalogs[locale] = try StringsCatalog(data: Array(data), name: path)
            } catch {
                throw LocalizationLoadingError(error.description)
            }
        }
        return LocalizationCatalogs(catalogs: catalogs, defaultLocale: defaultLocale)
    }
}

/// A localisation directory or catalog that cannot be loaded.
public struct LocalizationLoadingError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
