import COpenSSL

/// An `EVP_PKEY` this object owns and frees.
final class OpenSSLKey {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// A new EC P-256 key.
    static func generateP256() throws(SandboxError) -> OpenSSLKey {
        guard let key = push_EVP_EC_gen_P256() else {
            throw SandboxError.openSSL(.certificate, "generating an EC P-256 key failed")
        }
        return OpenSSLKey(taking: key)
    }
}
