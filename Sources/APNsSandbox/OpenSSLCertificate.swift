import COpenSSL

/// An `X509` certificate this object owns and frees.
final class OpenSSLCertificate {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        X509_free(pointer)
    }

    /// The certificate in PEM.
    func pemString() throws(SandboxError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw SandboxError.openSSL(.certificate, "BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, pointer) == 1 else {
            throw SandboxError.openSSL(.certificate, "writing the certificate as PEM failed")
        }
        var data: UnsafeMutablePointer<CChar>?
        let length = push_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw SandboxError.openSSL(.certificate, "reading the PEM back failed") }
        return data.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self)
        }
    }
}
