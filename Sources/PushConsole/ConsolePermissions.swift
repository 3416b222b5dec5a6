import PushCore

/// What an operator or API key may do in the console. The operators file grants scopes:
///
/// | scope | allows |
/// |---|---|
/// | `read` | request reports, the request list, queue and app status |
/// | `send` | compose, preview and send pushes |
/// | `tokens` | look up a device's record (personal data) and remove it |
/// | `dead-letters` | read dead letters' bodies (personal data) and replay them |
/// | `admin` | all of the above |
public enum ConsoleScope: String, Sendable, CaseIterable, Hashable, Comparable {
    case read
    case send
    case tokens
    case deadLetters = "dead-letters"
    case admin

    public static func < (lhs: ConsoleScope, rhs: ConsoleScope) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// The apps a scope is granted for.
public enum ConsoleAppSet: Sendable, Equatable {
    case all
    case only(Set<String>)

    public func contains(_ app: String) -> Bool {
        switch self {
        case .all: true
        case .only(let apps): apps.contains(app)
        }
    }

    public var isEmpty: Bool { self == .only([]) }

    func union(_ other: ConsoleAppSet) -> ConsoleAppSet {
        switch (self, other) {
        case (.all, _), (_, .all): .all
        case (.only(let a), .only(let b)): .only(a.union(b))
        }
    }

    /// `apps` narrowed to this set, in their order.
    public func filter(_ apps: [String]) -> [String] { apps.filter(contains) }
}

/// The scopes of one operator or API key, each for every app or for a list of apps.
public struct ConsolePermissions: Sendable, Equatable {
    private var grants: [ConsoleScope: ConsoleAppSet]

    public init(_ grants: [ConsoleScope: ConsoleAppSet]) { self.grants = grants }

    /// Everything, for every app: what an entry without `scopes` gets, as before scopes existed.
    public static let admin = ConsolePermissions([.admin: .all])

    /// The apps `scope` is granted for (through `admin` too).
    public func apps(for scope: ConsoleScope) -> ConsoleAppSet {
        (grants[scope] ?? .only([])).union(grants[.admin] ?? .only([]))
    }

    public func allows(_ scope: ConsoleScope, app: String) -> Bool { apps(for: scope).contains(app) }

    /// Whether `scope` is granted for at least one app.
    public func allowsSome(_ scope: ConsoleScope) -> Bool { !apps(for: scope).isEmpty }

    /// `read, send (com.example.shop)` — for logs and the page header.
    public var summary: String {
        grants.keys.sorted().map { scope in
            switch grants[scope]! {
            case .all: scope.rawValue
            case .only(let apps): "\(scope.rawValue) (\(apps.sorted().joined(separator: ", ")))"
            }
        }.joined(separator: ", ")
    }

    /// Reads an entry's `scopes` and `apps`: each scope is `"<scope>"` (for the entry's `apps`, or
    /// every app when it has none) or `"<scope>:<bundle id>"` (that app only).
    ///
    /// - Returns: nil when the entry has no `scopes` (the caller grants ``admin`` and warns).
    /// - Throws: ``OperatorsFileError`` naming the field.
    static func parse(scopes: JSONValue?, apps: JSONValue?, path: String, source: String) throws(OperatorsFileError) -> ConsolePermissions? {
        var entryApps = ConsoleAppSet.all
        switch apps {
        case nil, .null?: break
        case .array(let items)?:
            var names = Set<String>()
            for (index, item) in items.enumerated() {
                guard let app = item.stringValue, !app.isEmpty, !app.contains(":") else {
                    throw OperatorsFileError("\(source): \(path).apps[\(index)] must be an app's bundle id")
                }
                names.insert(app)
            }
            guard !names.isEmpty else { throw OperatorsFileError("\(source): \(path).apps is empty: list the apps, or leave it out for every app") }
            entryApps = .only(names)
        default:
            throw OperatorsFileError("\(source): \(path).apps must be an array of bundle ids")
        }
        let items: [JSONValue]
        switch scopes {
        case nil, .null?:
            return apps == nil || apps == .null ? nil : ConsolePermissions([.admin: entryApps])
        case .array(let array)?:
            items = array
        default:
            throw OperatorsFileError("\(source): \(path).scopes must be an array such as [\"read\", \"send:com.example.shop\"]")
        }
        guard !items.isEmpty else { throw OperatorsFileError("\(source): \(path).scopes is empty: the entry could do nothing") }
        var grants: [ConsoleScope: ConsoleAppSet] = [:]
        let known = ConsoleScope.allCases.map(\.rawValue).joined(separator: ", ")
        for (index, item) in items.enumerated() {
            guard let text = item.stringValue else { throw OperatorsFileError("\(source): \(path).scopes[\(index)] must be a string") }
            let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let scope = ConsoleScope(rawValue: String(parts[0])) else {
                throw OperatorsFileError("\(source): \(path).scopes[\(index)] \"\(text)\" is not a scope (\(known), optionally \":<bundle id>\")")
            }
            let granted: ConsoleAppSet
            if parts.count == 2 {
                guard !parts[1].isEmpty else { throw OperatorsFileError("\(source): \(path).scopes[\(index)] names no app after ':'") }
                granted = .only([String(parts[1])])
            } else {
                granted = entryApps
            }
            grants[scope] = (grants[scope] ?? .only([])).union(granted)
        }
        return ConsolePermissions(grants)
    }

    /// Every app a grant names (for checking them against the apps file).
    var namedApps: Set<String> {
        grants.values.reduce(into: Set<String>()) { names, apps in
            if case .only(let some) = apps { names.formUnion(some) }
        }
    }
}
