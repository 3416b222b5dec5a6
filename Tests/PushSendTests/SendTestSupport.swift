import Crypto
import Foundation
import TestSupport

/// The tests' logger (see ``TestLogger`` for `PUSH_TEST_LOG`).
let sendTestLogger = TestLogger.make("push-send-tests")

/// `.p8` signing keys for token auth (PKCS#8 PEM), made fresh per test process.
enum SendTestKeys {
    private static let keys: (p8: String, publicKey: String, other: String) = {
        let key = P256.Signing.PrivateKey()
        return (key.pemRepresentation, key.publicKey.pemRepresentation, P256.Signing.PrivateKey().pemRepresentation)
    }()
    /// The main key's `.p8`.
    static var p8: String { keys.p8 }
    /// The main key's public key (PEM), for apns-sandbox's `--public-key`.
    static var publicKeyPEM: String { keys.publicKey }
    /// Another key's `.p8`, for an app whose tokens the sandbox refuses.
    static var otherP8: String { keys.other }

    /// Writes a `.p8` (the main key's by default) into `directory` and returns its path.
    static func write(_ pem: String = p8, name: String = "AuthKey.p8", in directory: URL) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try pem.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
