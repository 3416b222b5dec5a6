import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PushCore
import PushServiceKit

/// The console's JSON API (`/api/v1/…`): the pages' operations for scripts and `pushctl`. Errors are
/// `{"error": "<code>", "message": "<field>: <what is wrong>"}` with the status they name.
struct ConsoleAPI: Sendable {
    let backend: ConsoleBackend

    static func json(_ object: Any, status: HTTPResponse.Status = .ok) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: Array(data))))
    }

    static func failure(_ error: ConsoleError) -> Response {
        json(["error": error.code, "message": error.description], status: HTTPResponse.Status(code: error.status))
    }

    static let maximumBody = 64 * 1024

    static func body(_ request: Request) async -> [UInt8]? {
        var request = request
        guard let buffer = try? await request.collectBody(upTo: maximumBody) else { return nil }
        return Array(buffer.readableBytesView)
    }

    /// The `app` of a push request's JSON, for the scope check before it is read in full; "" when it
    /// names none (the request is then refused for lack of the scope, or by the backend's own check).
    static func app(of body: [UInt8]) -> String {
        (try? JSONValue.parse(body))?["app"]?.stringValue ?? ""
    }

    func requests(_ request: Request, context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.read, app: nil) { return Self.failure(refusal) }
        let limit = Int(FormFields.parse(request.uri.query ?? "")["limit"] ?? "") ?? 50
        do {
            let reports = try await backend.recentReports(limit: min(max(limit, 1), 500), apps: context.apps(for: .read, of: backend.appIDs))
            return Self.json(["requests": reports.map(\.jsonObject)])
        } catch {
            return Self.failure(error)
        }
    }

    func report(context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.read, app: context.pathParameter("app")) { return Self.failure(refusal) }
        do {
            let report = try await backend.report(app: context.pathParameter("app"), requestID: context.pathParameter("id"))
            return Self.json(report.jsonObject)
        } catch {
            return Self.failure(error)
        }
    }

    /// The body: a push request; an absent `id` gets one made up. Read with the strict parser
    /// push-render uses (no repeated keys) and written back with its numbers as they were written.
    private func requestBody(_ request: Request) async throws(ConsoleError) -> [UInt8] {
        guard let body = await Self.body(request) else { throw ConsoleError(status: 413, code: "body_too_large", field: "body", "is over 64 KiB") }
        let json: JSONValue
        do {
            json = try JSONValue.parse(body)
        } catch {
            throw ConsoleError(field: "body", "is not valid JSON (\(error))")
        }
        guard case .object(var members) = json else { throw ConsoleError(field: "body", "must be a push request (a JSON object)") }
        guard json["id"] == nil else { return body }
        members.insert(
            (key: "id", value: .string(ComposeForm.generatedID(now: backend.now(), random: UInt32.random(in: 0...UInt32.max)))), at: 0)
        return JSONValue.object(members).serialized()
    }

    func preview(_ request: Request, context: ConsoleRequestContext) async -> Response {
        do {
            let body = try await requestBody(request)
            if let refusal = context.refusal(.send, app: Self.app(of: body)) { return Self.failure(refusal) }
            let preview = try await backend.preview(body)
            return Self.json([
                "id": preview.request.id, "app": preview.request.app.bundleID, "targets": preview.targets.map { $0 as Any } ?? NSNull(),
                "locales": preview.locales.map { ["locale": $0.locale, "payload": $0.payload] },
            ])
        } catch {
            return Self.failure(error)
        }
    }

    func send(_ request: Request, context: ConsoleRequestContext) async -> Response {
        do {
            let body = try await requestBody(request)
            if let refusal = context.refusal(.send, app: Self.app(of: body)) { return Self.failure(refusal) }
            let sent = try await backend.send(body, operatorName: context.operatorName ?? "-")
            return Self.json(
                ["id": sent.request.id, "app": sent.request.app.bundleID, "targets": sent.targets.map { $0 as Any } ?? NSNull()], status: .accepted)
        } catch {
            return Self.failure(error)
        }
    }

    func dead(_ request: Request, context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.deadLetters, app: nil) { return Self.failure(refusal) }
        let limit = Int(FormFields.parse(request.uri.query ?? "")["limit"] ?? "") ?? 100
        do {
            let letters = try await backend.deadLetters(
                limit: min(max(limit, 1), 1000), apps: context.permissions?.apps(for: .deadLetters) ?? .only([]))
            context.audit("dead.read", ["push.letters": "\(letters.count)"])
            return Self.json([
                "dead_letters": letters.map { letter -> [String: Any] in
                    [
                        "key": letter.key, "reason": letter.reason.description, "source": letter.source.map { $0 as Any } ?? NSNull(),
                        "app": letter.app.map { $0 as Any } ?? NSNull(),
                        "target": letter.target.map { $0 as Any } ?? NSNull(), "body": String(decoding: letter.body, as: UTF8.self),
                    ]
                }
            ])
        } catch {
            return Self.failure(error)
        }
    }

    func replay(_ request: Request, context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.deadLetters, app: nil) { return Self.failure(refusal) }
        let fields = FormFields.parse(request.uri.query ?? "")
        do {
            let queue = try await backend.replay(
                key: context.pathParameter("key"), to: fields["queue"].flatMap { $0.isEmpty ? nil : $0 },
                apps: context.permissions?.apps(for: .deadLetters) ?? .only([]), operatorName: context.operatorName ?? "-")
            return Self.json(["replayed": 1, "queue": queue])
        } catch {
            return Self.failure(error)
        }
    }

    func status(context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.read, app: nil) { return Self.failure(refusal) }
        let queues = await backend.queueStates().map { state -> [String: Any] in
            var object: [String: Any] = [
                "name": state.name, "ready": state.ready.map { $0 as Any } ?? NSNull(), "consumers": state.consumers.map { $0 as Any } ?? NSNull(),
            ]
            if let problem = state.problem { object["problem"] = problem }
            return object
        }
        let apps = await backend.appStates(of: context.apps(for: .read, of: backend.appIDs)).map { app -> [String: Any] in
            [
                "app": app.app, "environment": app.environment, "auth": app.auth,
                "expires_in_days": app.expiresInDays.map { ($0 * 10).rounded() / 10 as Any } ?? NSNull(),
                "paused_reason": app.pausedReason.map { $0 as Any } ?? NSNull(),
                "paused_for_ms": app.pausedForMilliseconds.map { $0 as Any } ?? NSNull(), "problems": app.problems, "warnings": app.warnings,
            ]
        }
        return Self.json(["queues": queues, "apps": apps])
    }

    func device(context: ConsoleRequestContext) async -> Response {
        let app = context.pathParameter("app")
        if let refusal = context.refusal(.tokens, app: app) { return Self.failure(refusal) }
        do {
            let record = try await backend.device(app: app, token: context.pathParameter("token"))
            context.audit(
                "token.lookup", app: app,
                ["push.token": "\(DeviceToken.redacted(hex: context.pathParameter("token")))", "push.found": "\(record != nil)"])
            guard let record else {
                return Self.failure(ConsoleError(status: 404, code: "not_found", "no device with this token is registered"))
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: record.jsonData())))
        } catch {
            return Self.failure(error)
        }
    }

    func deleteDevice(context: ConsoleRequestContext) async -> Response {
        if let refusal = context.refusal(.tokens, app: context.pathParameter("app")) { return Self.failure(refusal) }
        do {
            let removed = try await backend.removeDevice(
                app: context.pathParameter("app"), token: context.pathParameter("token"), operatorName: context.operatorName ?? "-")
            return removed
                ? Response(status: .noContent) : Self.failure(ConsoleError(status: 404, code: "not_found", "no device with this token is registered"))
        } catch {
            return Self.failure(error)
        }
    }
}
