import APNs

/// The admin API's JSON answers, written directly (recorded payloads are spliced in byte for byte:
/// they were validated as JSON objects when received).
enum AdminJSON {
    static func deliveries(_ deliveries: [RecordedDelivery]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + deliveries.count * 512)
        out.append(contentsOf: #"{"deliveries":["#.utf8)
        for (index, delivery) in deliveries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            let channel = delivery.channel
            out.append(contentsOf: #"{"token":"#.utf8)
            // A broadcast went to a channel, not to a token.
            if channel == nil { appendString(delivery.token, to: &out) } else { out.append(contentsOf: "null".utf8) }
            out.append(contentsOf: #","topic":"#.utf8)
            appendString(delivery.topic, to: &out)
            out.append(contentsOf: #","channel":"#.utf8)
            if let channel { appendString(channel, to: &out) } else { out.append(contentsOf: "null".utf8) }
            out.append(contentsOf: #","headers":{"#.utf8)
            for (fieldIndex, field) in delivery.headers.enumerated() {
                if fieldIndex > 0 { out.append(UInt8(ascii: ",")) }
                appendString(field.name, to: &out)
                out.append(UInt8(ascii: ":"))
                appendString(field.value, to: &out)
            }
            out.append(contentsOf: #"},"payload":"#.utf8)
            out.append(contentsOf: delivery.payload)
            out.append(contentsOf: #","received_at":"#.utf8)
            out.append(contentsOf: String(delivery.receivedAt).utf8)
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }

    static func statistics(_ statistics: SandboxStatistics) -> [UInt8] {
        var out = "{"
        out += #""requests":\#(statistics.requests),"delivered":\#(statistics.delivered),"#
        out += #""by_status":{"# + statistics.byStatus.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",") + "},"
        out +=
            #""by_reason":{"# + statistics.byReason.sorted { $0.key < $1.key }.map { "\(string($0.key)):\($0.value)" }.joined(separator: ",") + "},"
        out += #""recorded":\#(statistics.recorded),"connections":\#(statistics.connections),"#
        out += #""goaways":\#(statistics.goaways),"dropped_connections":\#(statistics.droppedConnections),"#
        out += #""aborted_connections":\#(statistics.abortedConnections),"lost_answers":\#(statistics.lostAnswers)"#
        if let distinct = statistics.distinctDelivered, let duplicates = statistics.duplicates {
            out += #","distinct_delivered":\#(distinct),"duplicates":\#(duplicates)"#
        }
        if statistics.channelRequests > 0 {
            out += #","channel_requests":\#(statistics.channelRequests),"#
            out +=
                #""channel_by_status":{"#
                + statistics.channelByStatus.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }
                .joined(separator: ",") + "},"
            out +=
                #""channel_by_reason":{"#
                + statistics.channelByReason.sorted { $0.key < $1.key }.map { "\(string($0.key)):\($0.value)" }
                .joined(separator: ",") + "}"
        }
        out += "}"
        return Array(out.utf8)
    }

    /// The active faults in the shape `PUT /faults` takes: `{"faults":[{"status":503,"rate":0.1},…]}`.
    static func faults(_ faults: SandboxFaults) -> [UInt8] {
        var entries = faults.statusRates.map { entry in
            let reason = entry.chosenReason.map { #","reason":\#(string($0.rawValue))"# } ?? ""
            return #"{"status":\#(entry.status),"rate":\#(entry.rate)\#(reason)}"#
        }
        if let every = faults.goawayEvery {
            let reason = faults.goawayReason.map { #","goaway_reason":\#(string($0.rawValue))"# } ?? ""
            entries.append(#"{"goaway_every":\#(every)\#(reason)}"#)
        }
        if let delay = faults.delayMilliseconds { entries.append(#"{"delay_ms":\#(delay)}"#) }
        if faults.broadcastFeatureNotEnabled { entries.append(#"{"broadcast_feature_not_enabled":true}"#) }
        if let every = faults.dropEvery { entries.append(#"{"drop_every":\#(every)}"#) }
        return Array(#"{"faults":[\#(entries.joined(separator: ","))]}"#.utf8)
    }

    /// `{"channels":[{"app","channel","message_storage_policy","push_type","created_at","broadcasts"}]}`.
    static func channels(_ channels: [ChannelRegistry.Channel]) -> [UInt8] {
        var out = Array(#"{"channels":["#.utf8)
        for (index, channel) in channels.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"app":"#.utf8)
            appendString(channel.bundleID, to: &out)
            out.append(contentsOf: #","channel":"#.utf8)
            appendString(channel.id, to: &out)
            out.append(contentsOf: #","message_storage_policy":\#(channel.storagePolicy.rawValue),"#.utf8)
            out.append(contentsOf: #""push_type":"\#(APNsChannelClient.channelPushType)","#.utf8)
            out.append(contentsOf: #""created_at":\#(channel.createdAt),"broadcasts":\#(channel.broadcasts)}"#.utf8)
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }

    static func tokenState(_ state: TokenState?, token: String) -> [UInt8] {
        switch state {
        case .unregistered(let timestamp)?:
            Array(#"{"token":\#(string(token)),"state":"unregistered","timestamp":\#(timestamp)}"#.utf8)
        case .expired(let timestamp)?:
            Array(#"{"token":\#(string(token)),"state":"expired","timestamp":\#(timestamp)}"#.utf8)
        case .bad?:
            Array(#"{"token":\#(string(token)),"state":"bad"}"#.utf8)
        case .liveActivity?:
            Array(#"{"token":\#(string(token)),"state":"liveactivity"}"#.utf8)
        case nil:
            Array(#"{"token":\#(string(token)),"state":"active"}"#.utf8)
        }
    }

    static func error(_ error: AdminRequestError) -> [UInt8] {
        Array(#"{"error":"invalid_field","field":\#(string(error.field)),"message":\#(string(error.description))}"#.utf8)
    }

    static func string(_ text: String) -> String {
        var out: [UInt8] = []
        appendString(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendString(_ text: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
