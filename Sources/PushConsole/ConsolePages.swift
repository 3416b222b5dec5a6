import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import PushCore
import PushServiceKit
import Redis
import Synchronization

/// The HTML pages: each reads what it shows through ``ConsoleBackend`` and renders a template of
/// ``ConsoleTemplates`` with plain dictionaries (so every value is HTML-escaped by the template).
struct ConsolePages: Sendable {
    let backend: ConsoleBackend
    let credentials: OperatorCredentials
    let sessions: ConsoleSessions
    let console: ConsoleConfiguration
    let library: MustacheLibrary

    /// Failed logins per name within ``loginWindow`` before that name is refused until the window ends.
    static let maximumLoginFailures = 10
    static let loginWindow: Duration = .seconds(900)

    init(backend: ConsoleBackend, credentials: OperatorCredentials, sessions: ConsoleSessions, console: ConsoleConfiguration) throws {
        self.backend = backend
        self.credentials = credentials
        self.sessions = sessions
        self.console = console
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all { try library.register(text, named: name) }
        self.library = library
    }

    // MARK: Responses

    func page(
        _ template: String, title: String, context: ConsoleRequestContext, status: HTTPResponse.Status = .ok, _ values: [String: Any]
    ) -> Response {
        page(template, title: title, operatorName: context.operatorName, csrf: context.session?.csrf, status: status, values)
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

    static let forbidden = plain(.forbidden, "The form is stale or came from elsewhere (CSRF check failed). Reload the page and try again.")

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
        // Counted before the password is checked, so parallel guesses cannot slip past the limit;
        // per name and client address, so nobody can lock an operator out from elsewhere.
        let address = context.remoteAddress?.ipAddress ?? "unknown"
        let failuresKey = "\(backend.reports.keyPrefix):console:login-attempts:\(address):\(name)"
        var expire: RedisCommand = ["EXPIRE", failuresKey]
        expire.append(Self.loginWindow.components.seconds)
        expire.append("NX")
        let attempts: Int64
        do {
            attempts = try await backend.redis.pipeline([RedisCommand(["INCR", failuresKey]), expire]).first?.integer ?? 0
        } catch {
            return loginPage(
                request, error: "The console cannot check logins now (Redis is unavailable). Try again shortly.", status: .serviceUnavailable)
        }
        if attempts > Int64(Self.maximumLoginFailures) {
            context.logger.warning("console login refused: too many attempts", metadata: ["push.operator": "\(name)", "push.client": "\(address)"])
            return loginPage(request, error: "Too many failed logins for this name; try again in 15 minutes.", name: name, status: .tooManyRequests)
        }
        guard let slot = Self.verifications.enter() else {
            return loginPage(
                request, error: "The console is busy checking other logins; try again in a moment.", name: name, status: .tooManyRequests)
        }
        let operatorName = credentials.authenticate(name: name, password: password)
        Self.verifications.leave(slot)
        guard let operatorName else {
            context.logger.notice(
                "console action", metadata: ["push.operator": "\(name)", "push.action": "login.failed", "push.client": "\(address)"])
            return loginPage(request, error: "Wrong name or password.", name: name, status: .unauthorized)
        }
        do {
            let (cookie, _) = try await sessions.create(operatorName: operatorName)
            _ = try? await backend.redis.execute(RedisCommand(["DEL", failuresKey]))
            context.logger.notice(
                "console action", metadata: ["push.operator": "\(operatorName)", "push.action": "login", "push.client": "\(address)"])
            return Self.redirect("/requests", cookie: sessionCookie(cookie))
        } catch {
            return loginPage(request, error: "The console cannot store sessions (Redis is unavailable): \(error)", status: .serviceUnavailable)
        }
    }

    /// Password checks at once (each is a PBKDF2 of 210,000 rounds): more get `429`, so a flood of
    /// logins cannot take every thread of the console.
    static let verifications = Admission(limit: 2)

    func logout(_ request: Request, context: ConsoleRequestContext) async -> Response {
        guard await checkedForm(request, context: context) != nil else { return Self.forbidden }
        if let cookie = ConsoleAuthentication.cookie(request) { try? await sessions.delete(cookie) }
        context.logger.notice("console action", metadata: ["push.operator": "\(context.operatorName ?? "-")", "push.action": "logout"])
        return Self.redirect("/login", cookie: sessionCookie("", expire: true))
    }

    // MARK: Compose

    func composePage(context: ConsoleRequestContext, form: [String: String] = [:], error: String? = nil, preview: [String: Any]? = nil) -> Response {
        var values: [String: Any] = [
            "form": form,
            "apps": Self.options(backend.appIDs, selected: form["app"]),
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
        guard let fields = await checkedForm(request, context: context) else { return Self.forbidden }
        let operatorName = context.operatorName ?? "-"
        if fields["action"] == "send" {
            guard let json = fields["request_json"], !json.isEmpty else {
                return composePage(context: context, form: fields, error: "Nothing to send: preview the push first.")
            }
            do {
                let sent = try await backend.send(Array(json.utf8), operatorName: operatorName)
                return Self.redirect("/requests/\(Self.pathComponent(sent.request.app.bundleID))/\(Self.pathComponent(sent.request.id))")
            } catch {
                return composePage(context: context, form: fields, error: error.description)
            }
        }
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
        do {
            let reports = try await backend.recentReports(limit: 100)
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
        var values: [String: Any] = ["limit": Self.deadLimit]
        if let notice { values["notice"] = notice }
        if let error { values["error"] = error }
        let query = FormFields.parse(request.uri.query ?? "")
        if values["notice"] == nil, let replayed = query["replayed"] { values["notice"] = "replayed 1 dead letter to \(replayed)" }
        do {
            let letters = try await backend.deadLetters(limit: Self.deadLimit)
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
        guard let fields = await checkedForm(request, context: context) else { return Self.forbidden }
        do {
            let queue = try await backend.replay(
                key: fields["key"] ?? "", to: fields["queue"].flatMap { $0.isEmpty ? nil : $0 }, operatorName: context.operatorName ?? "-")
            return Self.redirect("/dead?replayed=\(Self.pathComponent(queue))")
        } catch {
            return await deadPage(request, context: context, error: error.description)
        }
    }

    // MARK: Status

    func statusPage(context: ConsoleRequestContext) async -> Response {
        let queues = await backend.queueStates().map { state -> [String: Any] in
            [
                "name": state.name, "ready": state.ready.map(String.init) ?? (state.problem ?? "?"),
                "consumers": state.consumers.map(String.init) ?? "?",
                "warn": state.problem != nil || (state.name == backend.queues.dead && (state.ready ?? 0) > 0),
            ]
        }
        let apps = await backend.appStates().map { app -> [String: Any] in
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
        let query = FormFields.parse(request.uri.query ?? "")
        let app = query["app"] ?? backend.appIDs.first ?? ""
        let token = (query["token"] ?? "").trimmingCharacters(in: .whitespaces)
        var values: [String: Any] = ["apps": Self.options(backend.appIDs, selected: app), "token": token, "app": app]
        if let notice { values["notice"] = notice }
        if let removed = query["removed"] { values["notice"] = removed == "1" ? "Removed the device." : "The device was not registered." }
        var status = HTTPResponse.Status.ok
        if !token.isEmpty {
            do {
                let record = try await backend.device(app: app, token: token)
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
        guard let fields = await checkedForm(request, context: context) else { return Self.forbidden }
        let app = fields["app"] ?? ""
        do {
            let removed = try await backend.removeDevice(app: app, token: fields["token"] ?? "", operatorName: context.operatorName ?? "-")
            return Self.redirect("/tokens?app=\(Self.pathComponent(app))&removed=\(removed ? 1 : 0)")
        } catch {
            return page(
                "tokens", title: "Tokens", context: context, status: HTTPResponse.Status(code: error.status),
                [
                    "apps": Self.options(backend.appIDs, selected: app), "error": error.description,
                ])
        }
    }
}

/// At most `limit` holders at once; ``enter()`` answers nil when full instead of waiting.
final class Admission: Sendable {
    private let inside = Mutex(0)
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func enter() -> Bool? {
        inside.withLock { count -> Bool? in
            guard count < limit else { return nil }
            count += 1
            return true
        }
    }

    func leave(_: Bool) { inside.withLock { $0 -= 1 } }
}
