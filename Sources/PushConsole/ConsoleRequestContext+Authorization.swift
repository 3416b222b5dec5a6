import Hummingbird
import Logging

extension ConsoleRequestContext {
    /// Why `scope` is refused for `app` (any app when nil), recorded in the audit log; nil when the
    /// operator or key has it.
    func refusal(_ scope: ConsoleScope, app: String?) -> ConsoleError? {
        let permissions = permissions ?? ConsolePermissions([:])
        let allowed = app.map { permissions.allows(scope, app: $0) } ?? permissions.allowsSome(scope)
        guard !allowed else { return nil }
        audit("refused", app: app, ["push.reason": "scope", "push.scope": "\(scope.rawValue)"])
        let target = app.map { "the app \($0)" } ?? "any app"
        return ConsoleError(
            status: 403, code: "forbidden", field: "scope",
            "\(operatorName ?? "this key") lacks the scope \(scope.rawValue) for \(target) (it has: \(permissions.summary.isEmpty ? "none" : permissions.summary)); an admin grants scopes in the operators file"
        )
    }

    /// Of `apps`, those `scope` is granted for.
    func apps(for scope: ConsoleScope, of apps: [String]) -> [String] {
        (permissions ?? ConsolePermissions([:])).apps(for: scope).filter(apps)
    }

    /// One line of the audit log: `console action` at `notice`, with the operator or key, the client
    /// address and `push.action` (what was done or refused, and reads of personal data: token
    /// lookups, dead-letter bodies).
    func audit(_ action: String, operatorName name: String? = nil, app: String? = nil, _ details: Logger.Metadata = [:]) {
        var metadata: Logger.Metadata = [
            "push.operator": "\(name ?? operatorName ?? "-")", "push.action": "\(action)", "push.client": "\(clientAddress)",
        ]
        if let app { metadata["push.app"] = "\(app)" }
        metadata.merge(details) { $1 }
        logger.notice("console action", metadata: metadata)
    }
}
