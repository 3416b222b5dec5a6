import COpenSSL

/// An `X509` certificate this object owns and frees.
public final class TLSCertificate {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        X509_free(pointer)
    }

    /// The certificate in PEM.
    public func pemString() throws(TransportError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TransportError.openSSL(.certificate, "BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, pointer) == 1 else {
            throw TransportError.openSSL(.certificate, "writing the certificate as PEM failed")
        }
        var data: UnsafeMutablePointer<CChar>?
        let length = push_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw TransportError.openSSL(.certificate, "reading the PEM back failed") }
        return data.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self)
        }
    }
}

/// An `EVP_PKEY` this object owns and frees.
public final class TLSPrivateKey {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// A new EC P-256 key.
    static func generateP256() throws(TransportError) -> TLSPrivateKey {
        guard let key = push_EVP_EC_gen_P256() else {
            throw TransportError.openSSL(.certificate, "generating an EC P-256 key failed")
        }
        return TLSPrivateKey(taking: key)
    }
}
