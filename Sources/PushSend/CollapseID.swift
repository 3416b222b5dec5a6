/// The `apns-collapse-id` a notification gets when its request named none: derived from the request
/// id, so the twin a crash can cause replaces the first copy on the device instead of showing twice
/// (apps turn it off with `delivery.collapse_id_from_request: false`).
enum CollapseID {
    /// APNs' limit for `apns-collapse-id`.
    static let maximumBytes = 64

    /// The request id itself when it fits in 64 bytes; otherwise its first characters (at most 47
    /// bytes), `~`, and 16 hex digits of its FNV-1a hash, so long ids stay distinct.
    static func derived(fromRequestID id: String) -> String {
        if id.utf8.count <= maximumBytes { return id }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        var prefix = ""
        var bytes = 0
        for character in id {
            let size = character.utf8.count
            if bytes + size > 47 { break }
            prefix.append(character)
            bytes += size
        }
        let hex = String(hash, radix: 16)
        return prefix + "~" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
