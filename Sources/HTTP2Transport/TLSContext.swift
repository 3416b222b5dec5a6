import COpenSSL
import Glibc

/// The credentials a client presents (APNs certificate auth).
public enum TLSClientIdentity: Sendable, Equatable {
    /// A PEM certificate (chain) and an unencrypted PEM private key.
    case pem(certificateFile: String, privateKeyFile: String)
    /// A PKCS#12 archive (`.p12`, as Keychain exports it) and its password.
    case pkcs12(file: String, password: String)
}

/// The certificate a server presents.
public enum TLSServerIdentity {
    /// `--tls-cert` / `--tls-key`: a PEM certificate (chain) and PEM private key.
    case files(certificate: String, privateKey: String)
    /// A certificate made in memory (``GeneratedTLSIdentity``).
    case generated(GeneratedTLSIdentity)
}

/// An `SSL_CTX`, owned and freed here: TLS 1.2 or newer and ALPN `h2` only, on either side.
///
/// - A client context always verifies the server's certificate (system trust store plus an optional
///   CA file) and may carry a client certificate; each ``TLSStream`` adds SNI and the host-name check.
/// - A server context presents its certificate, offers only the TLS 1.2 suites HTTP/2 allows, refuses
///   clients that offer other protocols (fatal `no_application_protocol`), and with a client CA asks
///   for (does not require) a client certificate.
///
/// Configured once, then only used to make per-connection `SSL`s, which OpenSSL allows from any thread.
public final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Whether clients are asked for a certificate (server side, with a client CA).
    public let requestsClientCertificates: Bool

    /// TLS 1.2 suites allowed by HTTP/2 (RFC 7540 §9.2.2: ephemeral key exchange, AEAD); TLS 1.3
    /// keeps OpenSSL's defaults.
    static let tls12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:"
        + "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305"

    private init(method: OpaquePointer?, requestsClientCertificates: Bool) throws(TransportError) {
        guard let context = SSL_CTX_new(method) else { throw TransportError.openSSL(.tls, "SSL_CTX_new failed") }
        pointer = context
        self.requestsClientCertificates = requestsClientCertificates
        // From here on deinit frees the context if a step throws.
        guard push_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            throw TransportError.openSSL(.tls, "cannot require TLS 1.2")
        }
        _ = push_SSL_CTX_set_mode(context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
    }

    deinit {
        SSL_CTX_free(pointer)
    }

    // MARK: Client

    /// A client context trusting the system store plus `caFile`, presenting `identity` if given.
    /// Errors are of kind ``TransportError/Kind/certificate`` or ``TransportError/Kind/tls``.
    public static func client(trusting caFile: String?, identity: TLSClientIdentity?) throws(TransportError) -> TLSContext {
        let tls = try TLSContext(method: TLS_client_method(), requestsClientCertificates: false)
        let context = tls.pointer
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard SSL_CTX_set_default_verify_paths(context) == 1 else {
            throw TransportError.openSSL(.tls, "cannot load the system trust store")
        }
        if let caFile {
            guard access(caFile, R_OK) == 0 else {
                throw TransportError.posix(.certificate, "cannot read the CA file '\(caFile)'")
            }
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw TransportError.openSSL(.certificate, "the CA file '\(caFile)' holds no PEM certificate")
            }
        }
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        // SSL_CTX_set_alpn_protos returns 0 on success.
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
            throw TransportError.openSSL(.tls, "cannot offer ALPN h2")
        }
        switch identity {
        case nil:
            break
        case .pem(let certificateFile, let privateKeyFile)?:
            try usePEM(context, certificateFile: certificateFile, privateKeyFile: privateKeyFile)
        case .pkcs12(let file, let password)?:
            try usePKCS12(context, file: file, password: password)
        }
        return tls
    }

    private static func usePEM(_ context: OpaquePointer, certificateFile: String, privateKeyFile: String) throws(TransportError) {
        for path in [certificateFile, privateKeyFile] where access(path, R_OK) != 0 {
            throw TransportError.posix(.certificate, "cannot read '\(path)'")
        }
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw TransportError.openSSL(.certificate, "'\(certificateFile)' is not a PEM certificate")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            let details = drainOpenSSLErrorQueue()
            if details.contains("mismatch") {
                throw TransportError(.certificate, "the private key '\(privateKeyFile)' does not belong to the certificate '\(certificateFile)'")
            }
            throw TransportError(.certificate, "'\(privateKeyFile)' is not an unencrypted PEM private key (\(details))")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TransportError.openSSL(.certificate, "the private key '\(privateKeyFile)' does not belong to the certificate '\(certificateFile)'")
        }
    }

    private static func usePKCS12(_ context: OpaquePointer, file: String, password: String) throws(TransportError) {
        guard let stream = fopen(file, "rb") else {
            throw TransportError.posix(.certificate, "cannot read the .p12 file '\(file)'")
        }
        let archive = d2i_PKCS12_fp(stream, nil)
        fclose(stream)
        guard let archive else {
            throw TransportError.openSSL(.certificate, "'\(file)' is not a PKCS#12 (.p12) file")
        }
        defer { PKCS12_free(archive) }
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        var parsed = PKCS12_parse(archive, password, &key, &certificate, &chain)
        if parsed != 1 {
            // Keychain exports often use RC2/3DES, which OpenSSL 3 keeps in its legacy provider.
            ERR_clear_error()
            _ = OSSL_PROVIDER_load(nil, "legacy")
            _ = OSSL_PROVIDER_load(nil, "default")
            parsed = PKCS12_parse(archive, password, &key, &certificate, &chain)
        }
        guard parsed == 1, let key, let certificate else {
            let details = drainOpenSSLErrorQueue()
            let why = details.contains("mac verify failure") ? "wrong password for" : "cannot open"
            throw TransportError(.certificate, "\(why) the .p12 file '\(file)'\(details.isEmpty ? "" : " (\(details))")")
        }
        defer {
            EVP_PKEY_free(key)
            X509_free(certificate)
            if let chain { OPENSSL_sk_pop_free(chain) { X509_free(OpaquePointer($0)) } }
        }
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, key) == 1,
            SSL_CTX_check_private_key(context) == 1
        else {
            throw TransportError.openSSL(.certificate, "the .p12 file '\(file)' holds no usable certificate and key")
        }
        if let chain {
            for index in 0..<OPENSSL_sk_num(chain) {
                guard let link = OPENSSL_sk_value(chain, index) else { continue }
                _ = push_SSL_CTX_add1_chain_cert(context, OpaquePointer(link))
            }
        }
    }

    // MARK: Server

    /// A server context presenting `identity`; with `clientCAFile`, clients are asked for a
    /// certificate signed by one of its CAs.
    public static func server(identity: TLSServerIdentity, clientCAFile: String?) throws(TransportError) -> TLSContext {
        let tls = try TLSContext(method: TLS_server_method(), requestsClientCertificates: clientCAFile != nil)
        let context = tls.pointer
        guard SSL_CTX_set_cipher_list(context, tls12Ciphers) == 1 else {
            throw TransportError.openSSL(.tls, "configuring TLS versions and ciphers failed")
        }
        push_SSL_CTX_set_server_options(context)
        push_SSL_CTX_select_alpn_h2_only(context)
        let sessionContext = Array("apns-sandbox".utf8)
        guard SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count)) == 1 else {
            throw TransportError.openSSL(.tls, "setting the session id context failed")
        }
        switch identity {
        case .files(let certificate, let privateKey):
            guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
                throw TransportError.openSSL(.certificate, "--tls-cert \(certificate): cannot use it as a PEM certificate (chain)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, privateKey, SSL_FILETYPE_PEM) == 1 else {
                throw TransportError.openSSL(.certificate, "--tls-key \(privateKey): cannot use it as a PEM private key")
            }
        case .generated(let generated):
            guard SSL_CTX_use_certificate(context, generated.certificate.pointer) == 1,
                SSL_CTX_use_PrivateKey(context, generated.privateKey.pointer) == 1
            else { throw TransportError.openSSL(.certificate, "using the generated certificate failed") }
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TransportError.openSSL(.certificate, "the private key does not match the certificate")
        }
        if let clientCAFile {
            guard SSL_CTX_load_verify_locations(context, clientCAFile, nil) == 1 else {
                throw TransportError.openSSL(.certificate, "--client-ca \(clientCAFile): cannot load it as PEM CA certificates")
            }
            guard let names = SSL_load_client_CA_file(clientCAFile) else {
                throw TransportError.openSSL(.certificate, "--client-ca \(clientCAFile): no certificate names in it")
            }
            SSL_CTX_set_client_CA_list(context, names)
            push_SSL_CTX_request_client_certificate(context)
        }
        return tls
    }
}
