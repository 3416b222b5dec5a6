import Hummingbird
import NIOCore

/// The admin HTTP/1.1 JSON API (CONTRACT.md, "apns-sandbox"):
///
/// - `GET /deliveries?token=&app=&since=&limit=&channel=` → `{"deliveries":[{"token","topic",
///   "channel","headers":{…},"payload":{…},"received_at"}]}`, oldest first. `token` matches exactly
///   (any case), `app` matches the topic or the topic with a push-type suffix (`app.voip`, …),
///   `since` keeps `received_at ≥ since` (ms), `limit` keeps the newest N, `channel` keeps the
///   broadcasts on that channel. A broadcast has `"token": null`, the bundle id as `topic` and its
///   `channel`; a notification to a device has `"channel": null`.
/// - `GET /channels?app=` → `{"channels":[{"app","channel","message_storage_policy","push_type",
///   "created_at","broadcasts"}]}`: the broadcast channels the management API created (by app, then
///   in creation order); `DELETE /channels` → `{"deleted":N}` forgets them all.
/// - `DELETE /deliveries` → `{"deleted":N}`; counts in `/stats` stay.
/// - `PUT /tokens/{token}` `{"state":"unregistered","timestamp":<ms>}` | `{"state":"bad"}` |
///   `{"state":"liveactivity"}` (only liveactivity pushes, else `DeviceTokenNotForTopic`) |
///   `{"state":"active"}` → the state; `GET /tokens/{token}` reads it.
/// - `PUT /faults` one fault object, merged: `{"status":503,"rate":0.1}`, `{"goaway_every":N}`,
///   `{"delay_ms":D}`, `{"drop_every":N}` (0 switches one off) → `{"faults":[…]}`; `GET /faults`;
///   `DELETE /faults` clears them all.
/// - `GET /stats` → `{"requests","delivered","by_status":{"200":N,…},"by_reason":{…},"recorded",
///   "connections","goaways","dropped_connections","aborted_connections","lost_answers"}`, plus
///   `"distinct_delivered"` and `"duplicates"` with duplicate tracking on (`--track-duplicates`).
/// - `GET /healthz` → `{"status":"ok"}`.
///
/// Bad input answers 400 `{"error":"invalid_field","field":…,"message":…}`.
public struct SandboxAdminRoutes: Sendable {
    public let state: SandboxState
    /// Largest request body read.
    static let maximumBody = 64 * 1024

    public init(state: SandboxState) {
        self.state = state
    }

    public func add<Methods: RouterMethods>(to router: Methods) {
        let state = self.state
        router.get("/healthz") { _, _ -> Response in
            Self.json(.ok, Array(#"{"status":"ok"}"#.utf8))
        }
        router.get("/deliveries") { request, _ -> Response in
            let query = request.uri.queryParameters
            do throws(AdminRequestError) {
                let since = try AdminRequest.queryInteger(query.get("since"), field: "since")
                let limit = try AdminRequest.queryInteger(query.get("limit"), field: "limit")
                let token = query.get("token").flatMap { $0.isEmpty ? nil : $0 }
                let app = query.get("app").flatMap { $0.isEmpty ? nil : $0 }
                let channel = query.get("channel").flatMap { $0.isEmpty ? nil : $0 }
                let deliveries = state.deliveries(token: token, app: app, since: since, limit: limit.map { Int(clamping: $0) }, channel: channel)
                return Self.json(.ok, AdminJSON.deliveries(deliveries))
            } catch {
                return Self.badRequest(error)
            }
        }
        router.delete("/deliveries") { _, _ -> Response in
            Self.json(.ok, Array(#"{"deleted":\#(state.removeDeliveries())}"#.utf8))
        }
        router.get("/channels") { request, _ -> Response in
            let app = request.uri.queryParameters.get("app").flatMap { $0.isEmpty ? nil : String($0) }
            return Self.json(.ok, AdminJSON.channels(state.channels.channels(bundleID: app)))
        }
        router.delete("/channels") { _, _ -> Response in
            Self.json(.ok, Array(#"{"deleted":\#(state.channels.removeAll())}"#.utf8))
        }
        router.get("/tokens/:token") { _, context -> Response in
            let token = context.parameters.get("token") ?? ""
            return Self.json(.ok, AdminJSON.tokenState(state.state(ofToken: token), token: token.lowercased()))
        }
        router.put("/tokens/:token") { request, context -> Response in
            let token = (context.parameters.get("token") ?? "").lowercased()
            let body = try await request.body.collect(upTo: Self.maximumBody)
            do throws(AdminRequestError) {
                guard PushRequestValidator.isDeviceToken(Substring(token)) else {
                    throw AdminRequestError(field: "token", "must be hex, even length, 64–200 characters")
                }
                let tokenState = try AdminRequest.tokenState(from: Array(body.readableBytesView))
                state.setState(tokenState, forToken: token)
                return Self.json(.ok, AdminJSON.tokenState(tokenState, token: token))
            } catch {
                return Self.badRequest(error)
            }
        }
        router.get("/faults") { _, _ -> Response in
            Self.json(.ok, AdminJSON.faults(state.faults))
        }
        router.put("/faults") { request, _ -> Response in
            let body = Array(try await request.body.collect(upTo: Self.maximumBody).readableBytesView)
            var failure: AdminRequestError?
            let faults = state.updateFaults { faults in
                do throws(AdminRequestError) {
                    try AdminRequest.applyFault(from: body, to: &faults)
                } catch {
                    failure = error
                }
            }
            if let failure { return Self.badRequest(failure) }
            return Self.json(.ok, AdminJSON.faults(faults))
        }
        router.delete("/faults") { _, _ -> Response in
            state.clearFaults()
            return Self.json(.ok, AdminJSON.faults(state.faults))
        }
        router.get("/stats") { _, _ -> Response in
            Self.json(.ok, AdminJSON.statistics(state.statistics))
        }
    }

    private static func json(_ status: HTTPResponse.Status, _ body: [UInt8]) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    private static func badRequest(_ error: AdminRequestError) -> Response {
        json(.badRequest, AdminJSON.error(error))
    }
}
