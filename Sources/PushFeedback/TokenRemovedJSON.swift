import PushCore

/// The body of a `token.removed` event, written directly: push-feedback sends one per removed token,
/// and this costs a fraction of JSONEncoder. The bytes are exactly what `JSONEncoder` with
/// `.sortedKeys` writes for the ``PushCore/PushEvent`` (tested), so listeners see one format.
enum TokenRemovedJSON {
    static func encode(_ event: PushEvent) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + event.app.utf8.count + (event.token?.utf8.count ?? 0))
        out.append(contentsOf: #"{"app":"#.utf8)
        appendQuoted(event.app, to: &out)
        out.append(contentsOf: #","at":"#.utf8)
        out.append(contentsOf: String(event.at).utf8)
        if let batchID = event.batchID {
            out.append(contentsOf: #","batch_id":"#.utf8)
            appendQuoted(batchID, to: &out)
        }
        if let count = event.count {
            out.append(contentsOf: #","count":"#.utf8)
            out.append(contentsOf: String(count).utf8)
        }
        out.append(contentsOf: #","event":"#.utf8)
        appendQuoted(event.event, to: &out)
        if let reason = event.reason {
            out.append(contentsOf: #","reason":"#.utf8)
            appendQuoted(reason, to: &out)
        }
        if let requestID = event.requestID {
            out.append(contentsOf: #","request_id":"#.utf8)
            appendQuoted(requestID, to: &out)
        }
        if let token = event.token {
            out.append(contentsOf: #","token":"#.utf8)
            appendQuoted(token, to: &out)
        }
        if let tokens = event.tokens {
            out.append(contentsOf: #","tokens":["#.utf8)
            for (index, token) in tokens.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                appendQuoted(token, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A JSON string as JSONEncoder writes it: `"`, `\`, `/` and control characters escaped.
    static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "/"): out.append(contentsOf: #"\/"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0x08: out.append(contentsOf: #"\b"#.utf8)
            case 0x0C: out.append(contentsOf: #"\f"#.utf8)
            case 0..<0x20:
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
