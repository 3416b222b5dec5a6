/// Writes ``SendBatch`` JSON fast for one (request, environment, rendered payload): everything but
/// the batch id, tokens and time is serialised once, so a million-token fan-out does not run
/// `JSONEncoder` thousands of times over the same payload. The output decodes as ``SendBatch``
/// (same keys, same values) — tests check that against `JSONDecoder`.
public struct SendBatchEncoder: Sendable {
    /// `{"v":1,"request_id":…,"app":…,"environment":…,"push_type":…,"priority":…[,"expiration":…][,"collapse_id":…],"payload":"…",`
    private let head: [UInt8]

    public init(
        requestID: String, app: String, environment: AppConfiguration.Environment, pushType: String, priority: Int,
        expiration: Int64?, collapseID: String?, payload: [UInt8]
    ) {
        var head: [UInt8] = []
        head.reserveCapacity(payload.count + 256)
        func key(_ name: String) {
            JSONValue.writeString(name, to: &head)
            head.append(UInt8(ascii: ":"))
        }
        head.append(contentsOf: #"{"v":1,"#.utf8)
        key("request_id")
        JSONValue.writeString(requestID, to: &head)
        head.append(UInt8(ascii: ","))
        key("app")
        JSONValue.writeString(app, to: &head)
        head.append(UInt8(ascii: ","))
        key("environment")
        JSONValue.writeString(environment.rawValue, to: &head)
        head.append(UInt8(ascii: ","))
        key("push_type")
        JSONValue.writeString(pushType, to: &head)
        head.append(UInt8(ascii: ","))
        key("priority")
        head.append(contentsOf: String(priority).utf8)
        head.append(UInt8(ascii: ","))
        if let expiration {
            key("expiration")
            head.append(contentsOf: String(expiration).utf8)
            head.append(UInt8(ascii: ","))
        }
        if let collapseID {
            key("collapse_id")
            JSONValue.writeString(collapseID, to: &head)
            head.append(UInt8(ascii: ","))
        }
        key("payload")
        head.append(UInt8(ascii: "\""))
        JSONValue.writeStringContent(payload, to: &head)
        head.append(UInt8(ascii: "\""))
        head.append(UInt8(ascii: ","))
        self.head = head
    }

    /// The JSON of a broadcast batch: the payload for every device listening on `channel`.
    public func encodeBroadcast(batchID: String, channel: String, createdAt: Int64) -> [UInt8] {
        var bytes = head
        bytes.append(contentsOf: #""batch_id":"#.utf8)
        JSONValue.writeString(batchID, to: &bytes)
        bytes.append(contentsOf: #","channel":"#.utf8)
        JSONValue.writeString(channel, to: &bytes)
        bytes.append(contentsOf: #","tokens":[],"attempt":0,"created_at":"#.utf8)
        bytes.append(contentsOf: String(createdAt).utf8)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The JSON of one fresh batch (`attempt` 0). Tokens are lowercase hex and need no escaping.
    ///
    /// `marks` names the mark set and slots the tokens' delivery marks live in, when that is not the
    /// batch itself (``SendBatch/markSet``): push-render resuming a round puts a token back where the
    /// round's first try put it.
    public func encode(batchID: String, tokens: [DeviceToken], createdAt: Int64, marks: (markSet: String, slots: [Int])? = nil) -> [UInt8] {
        var bytes = head
        bytes.reserveCapacity(head.count + tokens.count * ((tokens.first?.hex.utf8.count ?? 64) + 3) + 96)
        bytes.append(contentsOf: #""batch_id":"#.utf8)
        JSONValue.writeString(batchID, to: &bytes)
        bytes.append(contentsOf: #","tokens":["#.utf8)
        for (index, token) in tokens.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: token.hex.utf8)
            bytes.append(UInt8(ascii: "\""))
        }
        if let marks {
            bytes.append(contentsOf: #"],"mark_set":"#.utf8)
            JSONValue.writeString(marks.markSet, to: &bytes)
            bytes.append(contentsOf: #","slots":["#.utf8)
            for (index, slot) in marks.slots.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: String(slot).utf8)
            }
        }
        bytes.append(contentsOf: #"],"attempt":0,"created_at":"#.utf8)
        bytes.append(contentsOf: String(createdAt).utf8)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
