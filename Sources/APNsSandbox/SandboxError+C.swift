import Foundation
import Glibc
import HTTP2Transport

/// The one place C failures become ``SandboxError``s: errno here, OpenSSL and nghttp2 through the
/// transport's ``TransportError``.
extension SandboxError {
    /// `what` failed with the current `errno`.
    static func posix(_ code: Code, _ what: String, errno number: Int32 = errno) -> SandboxError {
        SandboxError(code, "\(what): \(String(cString: strerror(number)))")
    }

    /// A transport failure, its code chosen by its kind.
    init(_ error: TransportError) {
        let code: Code =
            switch error.kind {
            case .certificate: .certificate
            case .http2: .http2
            case .system: .socket
            default: .tls
            }
        self.init(code, error.message)
    }
}

extension GeneratedTLSIdentity {
    /// Writes the CA's PEM to `path` atomically (a temporary file in the same folder, then a rename),
    /// so a client polling for the file never reads half of it.
    func writeCertificateAuthority(to path: String) throws(SandboxError) {
        let pem: String
        do {
            pem = try authority.pemString()
        } catch {
            throw SandboxError(error)
        }
        do {
            try Data(pem.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw SandboxError(.certificate, "--ca-out \(path): cannot write the CA certificate (\(error.localizedDescription))")
        }
    }
}
