/// Writing JSON text by hand where the order of keys matters (log lines, `/readyz`) and Foundation's
/// encoders would cost more than the string itself.
enum JSONText {
    /// `text` as a JSON string literal, quotes included.
    static func quoted(_ text: String) -> String {
        var result = ""
        appendQuoted(text, to: &result)
        return result
    }

    /// Appends `text` as a JSON string literal, quotes included.
    static func appendQuoted(_ text: String, to output: inout String) {
        output.append("\"")
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output.append("\\\"")
            case "\\": output.append("\\\\")
            case "\n": output.append("\\n")
            case "\r": output.append("\\r")
            case "\t": output.append("\\t")
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                output.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        output.append("\"")
    }

    /// `{"key":"value",…}` with the keys in the given order.
    static func object(_ pairs: [(String, String)]) -> String {
        var result = "{"
        for (index, (key, value)) in pairs.enumerated() {
            if index > 0 { result.append(",") }
            appendQuoted(key, to: &result)
            result.append(":")
            appendQuoted(value, to: &result)
        }
        result.append("}")
        return result
    }
}
