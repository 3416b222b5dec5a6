import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import PushCore
import PushServiceKit
import Redis

/// The HTML pages: each reads what it shows through ``ConsoleBackend`` and renders a template of
/// ``ConsoleTemplates`` with plain dictionaries (so every value is HTML-escaped by the template).
struct ConsolePages: Sendable {
    let backend: ConsoleBackend
    let credentials: OperatorCredentials
    let sessions: ConsoleSessions
    let console: ConsoleConfiguration
    let library: MustacheLibrary

    init(backend: ConsoleBackend, credentials: OperatorCredentials, sessions: ConsoleSessions, console: ConsoleConfiguration) throws {
        self.backend = backend
        self.credentials = credentials
        self.sessions = sessions
        self.console = console
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all { try library.register(text, named: name) }
        self.library = library
        // One check of a made-up password, so an unknown name waits as long as a real check from the
        // first login on.
        let rounds = credentials.operators.first?.password.rounds ?? PasswordHash.defaultRounds
        let dummy = PasswordHash(salt: Array(repeating: 0, count: 16), rounds: rounds, hash: Array(repeating: 0, count: 32))
        Task { _ = await Self.verifications.run { dummy.verify("-") } }
    }

    // MARK: Responses

    func page(
        _ template: String, title: String, context: ConsoleRequestContext, status: HTTPResponse.Status = .ok, _ values: [String: Any]
    ) -> Response {
        var values = values
        // The navigation shows only the pages this operator may use.
        if let permissions = context.permissions {
            values["nav"] = [
                "send": permissions.allowsSome(.send), "read": permissions.allowsSome(.read),
                "deadLetters": permissions.allowsSome(.deadLetters), "tokens": permissions.allowsSome(.tokens),
            ]
        }
        return page(template, title: title, operatorName: context.operatorName, csrf: context.session?.csrf, status: status, values)
    }

    /// The page for a refused scope: `403`, naming the scope and the app.
    func forbidden(_ error: ConsoleError, context: ConsoleRequestContext) -> Response {
        page("forbidden", title: "Not allowed", context: context, status: .forbidden, ["error": error.description])
    }

    func page(
        _ template: String, title: String, operatorName: String?, csrf: String?, status: HTTPResponse.Status = .ok, _ values: [String: Any]
    ) -> Response {
        var values = values
        values["title"] = title
        if let operatorName { values["operator"] = operatorName }
        if let csrf { values["csrf"] = csrf }
        let html = library.render(values, withTemplate: template) ?? "template \(template) missing"
        return Response(status: status, headers: [.contentType: "text/html; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(_ location: String, cookie: String? = nil) -> Response {
        var headers: HTTPFields = [.location: location]
        if let cookie { headers[.setCookie] = cookie }
        return Response(status: .seeOther, headers: headers)
    }

    static func plain(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func options(_ values: [String], selected: String?, labels: [String: String] = [:]) -> [[String: Any]] {
        values.map { ["value": $0, "label": labels[$0] ?? $0, "selected": $0 == selected] }
    }

    /// A browser-session cookie (no `Max-Age`: the server decides how long a login lasts); `expire`
    /// makes the browser drop it.
    func sessionCookie(_ value: String, expire: Bool = false) -> String {
        "\(ConsoleAuthentication.cookieName)=\(value); Path=/; HttpOnly; SameSite=Strict" + (expire ? "; Max-Age=0" : "")
            + (console.secureCookies ? "; Secure" : "")
    }

    /// The form of a POST, or nil when its CSRF token is not the session's (a bearer key has none to check).
    func checkedForm(_ request: Request, context: ConsoleRequestContext) async -> [String: String]? {
        guard let fields = try? await FormFields.body(request) else { return nil }
        if let session = context.session {
            guard let csrf = fields["csrf"], PasswordHash.constantTimeEqual(Array(csrf.utf8), Array(session.csrf.utf8)) else { return nil }
        }
        return fields
    }

    /// The answer to a form without the session's CSRF token, recorded in the audit log.
    func csrfRefused(_ context: ConsoleRequestContext) -> Response {
        context.audit("refused", ["push.reason": "csrf"])
        return Self.plain(.forbidden, "The form is stale or came from elsewhere (CSRF check failed). Reload the page and try again.")
    }

    // MARK: Login

    func loginPage(_ request: Request, error: String? = nil, name: String = "", status: HTTPResponse.Status = .ok) -> Response {
        var values: [String: Any] = ["name": name]
        if let error { values["error"] = error }
        return page("login", title: "Log in", operatorName: nil, csrf: nil, status: status, values)
    }

    func login(_ request: Request, context: ConsoleRequestContext) async -> Response {
        guard let fields = try? await FormFields.body(request, limit: 16 * 1024) else {
            return loginPage(request, error: "The login form could not be read.", status: .badRequest)
        }
        let name = String((fields["name"] ?? "").prefix(64))
        let password = fields["password"] ?? ""
        let address = context.clientAddress
        let throttle = LoginThrottle(redis: backend.redis, keyPrefix: backend.reports.keyPrefix)
        let unavailable = loginPage(
            request, error: "The console cannot check logins now (Redis is unavailable). Try again shortly.", status: .serviceUnavailable)
        // Counted before the password is checked, so neither parallel guesses nor a flood of names
        // reaches the password hashing beyond the budget.
        do {
            switch try await throttle.admit(name: name, address: address, now: backend.now()) {
            case nil:
                break
            case .addressBudget(let wait)?:
                context.audit("refused", operatorName: name, ["push.reason": "login_budget"])
                return tooManyLogins(request, name: name, wait: wait, "Too many logins from your address")
            case .backoff(let wait)?:
                context.audit("refused", operatorName: name, ["push.reason": "login_backoff"])
                return tooManyLogins(request, name: name, wait: wait, "Too many failed logins for this name")
            }
        } catch {
            context.logger.error("console logins: Redis is unavailable", metadata: ["push.error": "\(error)"])
            return unavailable
        }
        let verified: Bool?
        if credentials.operators.contains(where: { $0.name == name }) {
            verified = await Self.verifications.run { credentials.verify(name: name, password: password) }
        } else {
            // No hash to check: wait as long as a check takes, so timing does not tell names apart.
            try? await Task.sleep(for: Self.verifications.typicalCheck)
            verified = false
        }
        guard let verified else {
            return loginPage(
                request, error: "The console is busy checking other logins; try again in a moment.", name: name, status: .serviceUnavailable)
        }
        guard verified else {
            do {
                try await throttle.failed(name: name, address: address, now: backend.now())
            } catch {
                return unavailable
            }
            context.audit("login.failed", operatorName: name)
            return loginPage(request, error: "Wrong name or password.", name: name, status: .unauthorized)
        }
        do {
            let (cookie, _) = try await sessions.create(operatorName: name)
            try? await throttle.succeeded(name: name, address: address)
            context.audit("login", operatorName: name)
            return Self.redirect(Self.home(credentials.permissions(of: name)), cookie: sessionCookie(cookie))
        } catch {
            context.logger.error("console sessions: Redis is unavailable", metadata: ["push.error": "\(error)"])
            return loginPage(
                request, error: "The console cannot store sessions (Redis is unavailable). Try again shortly.", status: .serviceUnavailable)
        }
    }

    /// `429` with `Retry-After`, saying how long to wait.
    private func tooManyLogins(_ request: Request, name: String, wait: Duration, _ what: String) -> Response {
        let seconds = max(1, wait.components.seconds + (wait.components.attoseconds > 0 ? 1 : 0))
        var response = loginPage(request, error: "\(what); try again in \(seconds) s.", name: name, status: .tooManyRequests)
        response.headers[.retryAfter] = "\(seconds)"
        return response
    }

    /// Password checks (each a PBKDF2 of 210,000 rounds): two at once, a short line behind them.
    static let verifications = VerificationQueue()

    /// Where a login lands: the first page the operator may use.
    static func home(_ permissions: ConsolePermissions?) -> String {
        guard let permissions else { return "/login" }
        if permissions.allowsSome(.read) { return "/requests" }
        if permissions.allowsSome(.send) { return "/compose" }
        if permissions.allowsSome(.tokens) { return "/tokens" }
        return "/dead"
    }

    func logout(_ request: Request, context: ConsoleRequestContext) async -> Response {
        guard await checkedForm(request, context: context) != nil else { return csrfRefused(context) }
        if let cookie = ConsoleAuthentication.cookie(request) { try? await sessions.delete(cookie) }
        context.audit("logout")
        return Self.redirect("/login", cookie: sessionCookie("", expire: true))
    }

    // MARK: Compose

    func composePage(context: ConsoleRequestContext, form: [String: String] = [:], error: String? = nil, preview: [String: Any]? = nil) -> Response {
        if let refusal = context.refusal(.send, app: nil) { return forbidden(refusal, context: context) }
        var values: [String: Any] = [
            "form": form,
            "apps": Self.options(context.apps(for: .send, of: backend.appIDs), selected: form["app"]),
            "targetKinds": Self.options(ComposeForm.targetKinds, selected: form["target_kind"] ?? "topic"),
            "localizeModes": Self.options(LocalizationMode.allCases.map(\.rawValue), selected: form["localize"] ?? "device"),
            "pushTypes": Self.options(
                [""] + [
                    "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity", "pushtotalk", "widgets",
                    "controls",
                ],
                selected: form["push_type"] ?? "", labels: ["": "inferred"]),
            "priorities": Self.options(["", "10", "5", "1"], selected: form["priority"] ?? "", labels: ["": "inferred"]),
        ]
        if let error { values["error"] = error }
        if let preview { values["preview"] = preview }
        return page("compose", title: "Compose", context: context, status: error == nil ? .ok : .badRequest, values)
    }

    func compose(_ request: Request, context: ConsoleRequestContext) async -> Response {
        guard let fields = await checkedForm(request, context: context) else { return csrfRefused(context) }
        let operatorName = context.operatorName ?? "-"
        if fields["action"] == "send" {
            guard let json = fields["request_json"], !json.isEmpty else {
                return composePage(context: context, form: fields, error: "Nothing to send: preview the push first.")
            }
            if let refusal = context.refusal(.send, app: ConsoleAPI.app(of: Array(json.utf8))) { return forbidden(refusal, context: context) }
            do {
                let sent = try await backend.send(Array(json.utf8), operatorName: operatorName)
                return Self.redirect("/requests/\(Self.pathComponent(sent.request.app.bundleID))/\(Self.pathComponent(sent.request.id))")
            } catch {
                return composePage(context: context, form: fields, error: error.description)
            }
        }
        if let refusal = context.refusal(.send, app: fields["app"] ?? "") { return forbidden(refusal, context: context) }
        do {
            let body = try ComposeForm(fields: fields).requestJSON(
                generatedID: ComposeForm.generatedID(now: backend.now(), random: UInt32.random(in: 0...UInt32.max)))
            let preview = try await backend.preview(body)
            context.logger.notice(
                "console action",
                metadata: ["push.operator": "\(operatorName)", "push.action": "preview", "push.request_id": "\(preview.request.id)"])
            let targets = preview.targets.map(String.init) ?? "every device listening on the channel"
            let values: [String: Any] = [
                "id": preview.request.id, "app": preview.request.app.bundleID, "targets": targets,
                "targetsNote": preview.targets == nil ? "" : (preview.targets == 1 ? "device now" : "devices now"),
                "locales": preview.locales.map { ["locale": $0.locale, "payload": Self.pretty($0.payload)] },
                "requestJSON": String(decoding: body, as: UTF8.self),
                "sendLabel": preview.targets.map { "Send to \($0) device\($0 == 1 ? "" : "s")" } ?? "Send the broadcast",
            ]
            return composePage(context: context, form: fields, preview: values)
        } catch {
            return composePage(context: context, form: fields, error: error.description)
        }
    }

    /// A JSON text indented, for reading (the text itself when it is not JSON).
    static func pretty(_ json: String) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        else { return json }
        return String(decoding: data, as: UTF8.self)
    }

    static func pathComponent(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#"))) ?? text
    }

    // MARK: Requests

    func requestsPage(context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.read, app: nil) { return forbidden(refusal, context: context) }
        do {
            let reports = try await backend.recentReports(limit: 100, apps: context.apps(for: .read, of: backend.appIDs))
            let rows: [[String: Any]] = reports.map { report in
                [
                    "id": report.id, "app": report.app, "state": report.state.rawValue, "targeted": report.targeted, "delivered": report.delivered,
                    "failedTotal": report.failedTotal, "started": (report.startedAt ?? report.queuedAt).map(RequestReport.timestamp) ?? "–",
                    "href": "/requests/\(Self.pathComponent(report.app))/\(Self.pathComponent(report.id))",
                ]
            }
            return page("requests", title: "Requests", context: context, ["reports": rows])
        } catch {
            return page("requests", title: "Requests", context: context, status: .serviceUnavailable, ["error": error.description, "reports": []])
        }
    }

    func requestPage(context: ConsoleRequestContext) async -> Response {
        let app = context.pathParameter("app")
        let id = context.pathParameter("id")
        if let refusal = context.refusal(.read, app: app) { return forbidden(refusal, context: context) }
        do {
            let report = try await backend.report(app: app, requestID: id)
            return page("request", title: "Request \(id)", context: context, Self.reportValues(report))
        } catch {
            return page(
                "request", title: "Request \(id)", context: context, status: HTTPResponse.Status(code: error.status),
                ["error": error.description, "report": ["id": id, "app": app, "state": "unknown"], "api": ""])
        }
    }

    static func reportValues(_ report: RequestReport) -> [String: Any] {
        let counts: [(String, String, Int, String)] = [
            ("targeted", "Targeted", report.targeted, "devices the target reached"),
            ("skipped", "Skipped", report.skipped, "by the devices' settings"),
            ("batches", "Batches", report.batches, "send batches published"),
            ("sent", "Sent", report.sent, "tokens handed to push-send"),
            ("delivered", "Delivered", report.delivered, "accepted by APNs"),
            ("failed", "Failed", report.failedTotal, "no delivery, by reason below"),
            ("retried", "Retried", report.retried, "tries after 429/5xx/lost connections"),
            ("deferred", "Deferred", report.deferred, "waited for rate limits or a paused app"),
            ("removed", "Removed", report.removed, "invalid tokens removed from the registry"),
        ]
        var reportValues: [String: Any] = ["id": report.id, "app": report.app, "state": report.state.rawValue]
        if let reason = report.deadReason { reportValues["deadReason"] = reason }
        return [
            "report": reportValues,
            "api": "/api/v1/requests/\(pathComponent(report.app))/\(pathComponent(report.id))",
            "counts": counts.map { ["name": $0.0, "label": $0.1, "value": $0.2, "hint": $0.3] },
            "failures": report.failed.keys.sorted().map { ["reason": $0, "count": report.failed[$0]!] },
            "firstDelivery": report.firstDeliveryAt.map(RequestReport.timestamp) ?? "–",
            "lastDelivery": report.lastDeliveryAt.map(RequestReport.timestamp) ?? "–",
        ]
    }

    // MARK: Dead letters

    static let deadLimit = 100

    func deadPage(_ request: Request, context: ConsoleRequestContext, notice: String? = nil, error: String? = nil) async -> Response {
        if let refusal = context.refusal(.deadLetters, app: nil) { return forbidden(refusal, context: context) }
        var values: [String: Any] = ["limit": Self.deadLimit]
        if let notice { values["notice"] = notice }
        if let error { values["error"] = error }
        let query = FormFields.parse(request.uri.query ?? "")
        if values["notice"] == nil, let replayed = query["replayed"] { values["notice"] = "replayed 1 dead letter to \(replayed)" }
        do {
            let letters = try await backend.deadLetters(limit: Self.deadLimit, apps: context.permissions?.apps(for: .deadLetters) ?? .only([]))
            context.audit("dead.read", ["push.letters": "\(letters.count)"])
            let workQueues = backend.queues.workQueues.map(\.name)
            values["letters"] = letters.map { letter -> [String: Any] in
                let body = String(decoding: letter.body.prefix(600), as: UTF8.self) + (letter.body.count > 600 ? "…" : "")
                return [
                    "key": letter.key, "reason": letter.reason.description, "source": letter.source ?? letter.target.map { "(\($0))" } ?? "–",
                    "body": body, "queues": Self.options(workQueues, selected: letter.target ?? ""),
                ]
            }
        } catch {
            values["error"] = error.description
            values["letters"] = [] as [Any]
        }
        return page("dead", title: "Dead letters", context: context, status: values["error"] == nil ? .ok : .badRequest, values)
    }

    func replay(_ request: Request, context: ConsoleRequestContext) async -> Response {
        guard let fields = await checkedForm(request, context: context) else { return csrfRefused(context) }
        if let refusal = context.refusal(.deadLetters, app: nil) { return forbidden(refusal, context: context) }
        do {
            let queue = try await backend.replay(
                key: fields["key"] ?? "", to: fields["queue"].flatMap { $0.isEmpty ? nil : $0 },
                apps: context.permissions?.apps(for: .deadLetters) ?? .only([]), operatorName: context.operatorName ?? "-")
            return Self.redirect("/dead?replayed=\(Self.pathComponent(queue))")
        } catch  where error.status == 403 {
            return forbidden(error, context: context)
        } catch {
            return await deadPage(request, context: context, error: error.description)
        }
    }

    // MARK: Status

    func statusPage(context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.read, app: nil) { return forbidden(refusal, context: context) }
        let queues = await backend.queueStates().map { state -> [String: Any] in
            [
                "name": state.name, "ready": state.ready.map(String.init) ?? (state.problem ?? "?"),
                "consumers": state.consumers.map(String.init) ?? "?",
                "warn": state.problem != nil || (state.name == backend.queues.dead && (state.ready ?? 0) > 0),
            ]
        }
        let apps = await backend.appStates(of: context.apps(for: .read, of: backend.appIDs)).map { app -> [String: Any] in
            let paused = app.pausedReason.map { "\($0), \(max(1, (app.pausedForMilliseconds ?? 0) / 1000)) s left" } ?? "no"
            return [
                "app": app.app, "environment": app.environment, "auth": app.auth,
                "expires": app.expiresInDays.map { String(format: "%.0f days", $0) } ?? "–", "paused": paused,
                "problems": (app.problems + app.warnings).joined(separator: "; "),
                "warn": app.pausedReason != nil || !app.problems.isEmpty,
            ]
        }
        return page("status", title: "Status", context: context, ["queues": queues, "apps": apps])
    }

    // MARK: Tokens

    func tokensPage(_ request: Request, context: ConsoleRequestContext, notice: String? = nil) async -> Response {
        if let refusal = context.refusal(.tokens, app: nil) { return forbidden(refusal, context: context) }
        let query = FormFields.parse(request.uri.query ?? "")
        let apps = context.apps(for: .tokens, of: backend.appIDs)
        let app = query["app"] ?? apps.first ?? ""
        let token = (query["token"] ?? "").trimmingCharacters(in: .whitespaces)
        var values: [String: Any] = ["apps": Self.options(apps, selected: app), "token": token, "app": app]
        if let notice { values["notice"] = notice }
        if let removed = query["removed"] { values["notice"] = removed == "1" ? "Removed the device." : "The device was not registered." }
        var status = HTTPResponse.Status.ok
        if !token.isEmpty {
            if let refusal = context.refusal(.tokens, app: app) { return forbidden(refusal, context: context) }
            do {
                let record = try await backend.device(app: app, token: token)
                context.audit("token.lookup", app: app, ["push.token": "\(DeviceToken.redacted(hex: token))", "push.found": "\(record != nil)"])
                values["looked"] = true
                if let record { values["record"] = Self.pretty(String(decoding: record.jsonData(), as: UTF8.self)) }
            } catch {
                values["error"] = error.description
                status = HTTPResponse.Status(code: error.status)
            }
        }
        return page("tokens", title: "Tokens", context: context, status: status, values)
    }

    func deleteToken(_ request: Request, context: ConsoleRequestContext) async -> Response {
        guard let fields = await checkedForm(request, context: context) else { return csrfRefused(context) }
        let app = fields["app"] ?? ""
        if let refusal = context.refusal(.tokens, app: app) { return forbidden(refusal, context: context) }
        do {
            let removed = try await backend.removeDevice(app: app, token: fields["token"] ?? "", operatorName: context.operatorName ?? "-")
            return Self.redirect("/tokens?app=\(Self.pathComponent(app))&removed=\(removed ? 1 : 0)")
        } catch {
            return page(
                "tokens", title: "Tokens", context: context, status: HTTPResponse.Status(code: error.status),
                [
                    "apps": Self.options(context.apps(for: .tokens, of: backend.appIDs), selected: app), "error": error.description,
                ])
        }
    }
}
