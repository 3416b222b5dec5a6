import Crypto
import Foundation
import Logging

/// The tests' logger: silent unless `PUSH_TEST_LOG` is set.
let sendTestLogger: Logger = {
    if ProcessInfo.processInfo.environment["PUSH_TEST_LOG"] != nil {
        var logger = Logger(label: "push-send-tests")
        logger.logLevel = .debug
        return logger
    }
    return Logger(label: "push-send-tests", factory: { _ in SwiftLogNoOpLogHandler() })
}()

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
