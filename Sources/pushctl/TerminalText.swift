/// Text from outside (a dead letter's body, a header) made safe to print to an operator's terminal:
/// control characters, escape sequences included, are written as `\u{1B}` and the like, so nothing
/// printed can move the cursor, rewrite earlier lines or change the terminal's settings.
enum TerminalText {
    static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            let value = scalar.value
            // C0 controls (but tab), DEL and C1 controls; newlines too, so one letter stays one block.
            if (value < 0x20 && value != 0x09) || (0x7f...0x9f).contains(value) || value == 0x2028 || value == 0x2029 {
                result += "\\u{\(String(value, radix: 16, uppercase: true))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
