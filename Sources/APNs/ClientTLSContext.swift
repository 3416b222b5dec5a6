import COpenSSL
import Glibc

/// The client's `SSL_CTX`, owned and freed here: TLS 1.2 or newer, ALPN `h2` only, the server's
/// certificate always verified (system trust store plus an optional CA file), and the client
/// certificate for certificate auth. Connections make their `SSL` from it and add SNI and the host
/// name check per connection.
final class ClientTLSContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init(caFile: String?, certificate: APNsClientCertificate?) throws(APNsClientError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw APNsClientError.openSSL(.credentials, "SSL_CTX_new failed")
        }
        pointer = context
        // From here on deinit frees the context if a step throws.
        guard push_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            throw APNsClientError.openSSL(.credentials, "cannot require TLS 1.2")
        }
        _ = push_SSL_CTX_set_mode(context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard SSL_CTX_set_default_verify_paths(context) == 1 else {
            throw APNsClientError.openSSL(.credentials, "cannot load the system trust store")
        }
        if let caFile {
            guard access(caFile, R_OK) == 0 else {
                throw APNsClientError.posix(.credentials, "cannot read the CA file '\(caFile)'")
            }
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw APNsClientError.openSSL(.credentials, "the CA file '\(caFile)' holds no PEM certificate")
            }
        }
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        // SSL_CTX_set_alpn_protos returns 0 on success.
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
            throw APNsClientError.openSSL(.credentials, "cannot offer ALPN h2")
        }
        switch certificate?.source {
        case nil:
            break
        case .pem(let certificateFile, let privateKeyFile)?:
            try Self.usePEM(context, certificateFile: certificateFile, privateKeyFile: privateKeyFile)
        case .pkcs12(let file, let password)?:
            try Self.usePKCS12(context, file: file, password: password)
        }
    }

    deinit {
        SSL_CTX_free(pointer)
    }

    private static func usePEM(_ context: OpaquePointer, certificateFile: String, privateKeyFile: String) throws(APNsClientError) {
        for path in [certificateFile, privateKeyFile] where access(path, R_OK) != 0 {
            throw APNsClientError.posix(.credentials, "cannot read '\(path)'")
        }
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw APNsClientError.openSSL(.credentials, "'\(certificateFile)' is not a PEM certificate")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            let details = APNsClientError.openSSLErrorQueue()
            if details.contains("mismatch") {
                throw APNsClientError(.credentials, "the private key '\(privateKeyFile)' does not belong to the certificate '\(certificateFile)'")
            }
            throw APNsClientError(.credentials, "'\(privateKeyFile)' is not an unencrypted PEM private key (\(details))")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw APNsClientError.openSSL(.credentials, "the private key '\(privateKeyFile)' does not belong to the certificate '\(certificateFile)'")
        }
    }

    private static func usePKCS12(_ context: OpaquePointer, file: String, password: String) throws(APNsClientError) {
        guard let stream = fopen(file, "rb") else {
            throw APNsClientError.posix(.credentials, "cannot read the .p12 file '\(file)'")
        }
        let archive = d2i_PKCS12_fp(stream, nil)
        fclose(stream)
        guard let archive else {
            throw APNsClientError.openSSL(.credentials, "'\(file)' is not a PKCS#12 (.p12) file")
        }
        defer { PKCS12_free(archive) }
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        var parsed = PKCS12_parse(archive, password, &key, &certificate, &chain)
        if parsed != 1 {
            // Keychain exports often use RC2/3DES, which OpenSSL 3 keeps in its legacy provider.
            ERR_clear_error()
            Self.loadLegacyProviders()
            parsed = PKCS12_parse(archive, password, &key, &certificate, &chain)
        }
        guard parsed == 1, let key, let certificate else {
            let details = APNsClientError.openSSLErrorQueue()
            let why = details.contains("mac verify failure") ? "wrong password for" : "cannot open"
            throw APNsClientError(.credentials, "\(why) the .p12 file '\(file)'\(details.isEmpty ? "" : " (\(details))")")
        }
        defer {
            EVP_PKEY_free(key)
            X509_free(certificate)
            if let chain { OPENSSL_sk_pop_free(chain) { X509_free(OpaquePointer($0)) } }
        }
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, key) == 1,
            SSL_CTX_check_private_key(context) == 1
        else {
            throw APNsClientError.openSSL(.credentials, "the .p12 file '\(file)' holds no usable certificate and key")
        }
        if let chain {
            for index in 0..<OPENSSL_sk_num(chain) {
                guard let link = OPENSSL_sk_value(chain, index) else { continue }
                _ = push_SSL_CTX_add1_chain_cert(context, OpaquePointer(link))
            }
        }
    }

    private static func loadLegacyProviders() {
        _ = OSSL_PROVIDER_load(nil, "legacy")
        _ = OSSL_PROVIDER_load(nil, "default")
    }
}
