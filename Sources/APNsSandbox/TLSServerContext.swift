import COpenSSL

/// The server's `SSL_CTX`, owned and freed here: TLS 1.2+, ALPN `h2` only (a client offering only
/// other protocols gets a fatal `no_application_protocol` alert), the server certificate, and — with
/// `--client-ca` — a request (not a requirement) for a client certificate.
///
/// Configured once, then only used to make per-connection `SSL`s, which OpenSSL allows from any
/// thread.
final class TLSServerContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Whether clients are asked for a certificate.
    let requestsClientCertificates: Bool

    /// TLS 1.2 suites allowed by HTTP/2 (RFC 7540 §9.2.2: ephemeral key exchange, AEAD); TLS 1.3
    /// keeps OpenSSL's defaults.
    static let tls12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:"
        + "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305"

    /// - Parameters:
    ///   - certificateFiles: `--tls-cert` and `--tls-key`, when given.
    ///   - generated: The generated identity otherwise.
    ///   - clientCAFile: CA certificates (PEM) whose client certificates are accepted.
    init(certificateFiles: (certificate: String, privateKey: String)?, generated: GeneratedServerIdentity?, clientCAFile: String?) throws(SandboxError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw SandboxError.openSSL(.tls, "SSL_CTX_new failed")
        }
        pointer = context
        requestsClientCertificates = clientCAFile != nil
        guard push_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1,
            SSL_CTX_set_cipher_list(context, Self.tls12Ciphers) == 1
        else { throw SandboxError.openSSL(.tls, "configuring TLS versions and ciphers failed") }
        push_SSL_CTX_set_server_options(context)
        _ = push_SSL_CTX_set_mode(context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        push_SSL_CTX_select_alpn_h2_only(context)
        let sessionContext = Array("apns-sandbox".utf8)
        guard SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count)) == 1 else {
            throw SandboxError.openSSL(.tls, "setting the session id context failed")
        }

        if let files = certificateFiles {
            guard SSL_CTX_use_certificate_chain_file(context, files.certificate) == 1 else {
                throw SandboxError.openSSL(.certificate, "--tls-cert \(files.certificate): cannot use it as a PEM certificate (chain)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, files.privateKey, SSL_FILETYPE_PEM) == 1 else {
                throw SandboxError.openSSL(.certificate, "--tls-key \(files.privateKey): cannot use it as a PEM private key")
            }
        } else if let generated {
            guard SSL_CTX_use_certificate(context, generated.certificate.pointer) == 1,
                SSL_CTX_use_PrivateKey(context, generated.privateKey.pointer) == 1
            else { throw SandboxError.openSSL(.certificate, "using the generated certificate failed") }
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw SandboxError.openSSL(.certificate, "the private key does not match the certificate")
        }

        if let clientCAFile {
            guard SSL_CTX_load_verify_locations(context, clientCAFile, nil) == 1 else {
                throw SandboxError.openSSL(.certificate, "--client-ca \(clientCAFile): cannot load it as PEM CA certificates")
            }
            guard let names = SSL_load_client_CA_file(clientCAFile) else {
                throw SandboxError.openSSL(.certificate, "--client-ca \(clientCAFile): no certificate names in it")
            }
            SSL_CTX_set_client_CA_list(context, names)
            push_SSL_CTX_request_client_certificate(context)
        }
    }

    deinit {
        SSL_CTX_free(pointer)
    }
}
