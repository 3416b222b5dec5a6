import COpenSSL

/// A throwaway certificate authority and the server certificate it signs, made in memory at start
/// when no `--tls-cert` is given: EC P-256 keys, SHA-256 signatures, the server certificate valid for
/// `DNS:localhost, IP:127.0.0.1`. Clients trust the CA (``authority``, as PEM).
public struct GeneratedTLSIdentity {
    public let authority: TLSCertificate
    public let certificate: TLSCertificate
    let privateKey: TLSPrivateKey

    /// CA validity: ten years; server certificate: one year (a new pair is made at every start).
    static let authorityValidity: Int = 10 * 365 * 24 * 3600
    static let certificateValidity: Int = 365 * 24 * 3600

    /// - Parameter extraNames: Further names the server certificate holds besides `localhost` and
    ///   `127.0.0.1`: DNS names, or IP addresses (e.g. the name other containers reach it by).
    public init(extraNames: [String] = []) throws(TransportError) {
        let alternativeNames = (["DNS:localhost", "IP:127.0.0.1"] + extraNames.map { TCPConnector.isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" })
            .joined(separator: ",")
        let authorityKey = try TLSPrivateKey.generateP256()
        let authority = try Self.makeCertificate(
            subject: [("O", "apns-sandbox"), ("CN", "apns-sandbox local CA")],
            publicKey: authorityKey,
            issuer: nil,
            signingKey: authorityKey,
            validity: Self.authorityValidity,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ]
        )
        let serverKey = try TLSPrivateKey.generateP256()
        let certificate = try Self.makeCertificate(
            subject: [("O", "apns-sandbox"), ("CN", "localhost")],
            publicKey: serverKey,
            issuer: authority,
            signingKey: authorityKey,
            validity: Self.certificateValidity,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth"),
                (NID_subject_alt_name, alternativeNames),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ]
        )
        self.authority = authority
        self.certificate = certificate
        self.privateKey = serverKey
    }

    private static func makeCertificate(
        subject: [(field: String, value: String)],
        publicKey: TLSPrivateKey,
        issuer: TLSCertificate?,
        signingKey: TLSPrivateKey,
        validity: Int,
        extensions: [(nid: Int32, value: String)]
    ) throws(TransportError) -> TLSCertificate {
        guard let pointer = X509_new() else { throw TransportError.openSSL(.certificate, "X509_new failed") }
        let certificate = TLSCertificate(taking: pointer)
        guard X509_set_version(pointer, 2) == 1 else { throw TransportError.openSSL(.certificate, "setting the version failed") }
        try setRandomSerial(pointer)
        guard X509_gmtime_adj(X509_getm_notBefore(pointer), -3600) != nil,
            X509_gmtime_adj(X509_getm_notAfter(pointer), validity) != nil
        else { throw TransportError.openSSL(.certificate, "setting the validity failed") }
        let name = X509_get_subject_name(pointer)
        for (field, value) in subject where push_X509_NAME_add_text_entry(name, field, value) != 1 {
            throw TransportError.openSSL(.certificate, "setting the subject's \(field) failed")
        }
        let issuerName = issuer.map { X509_get_subject_name($0.pointer) } ?? name
        guard X509_set_issuer_name(pointer, issuerName) == 1, X509_set_pubkey(pointer, publicKey.pointer) == 1 else {
            throw TransportError.openSSL(.certificate, "setting the issuer or public key failed")
        }
        var context = X509V3_CTX()
        push_X509V3_set_ctx_nodb(&context)
        X509V3_set_ctx(&context, issuer?.pointer ?? pointer, pointer, nil, nil, 0)
        for (nid, value) in extensions {
            guard let `extension` = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw TransportError.openSSL(.certificate, "making the extension \(String(cString: OBJ_nid2sn(nid))) = \(value) failed")
            }
            defer { X509_EXTENSION_free(`extension`) }
            guard X509_add_ext(pointer, `extension`, -1) == 1 else {
                throw TransportError.openSSL(.certificate, "adding the extension \(String(cString: OBJ_nid2sn(nid))) failed")
            }
        }
        guard X509_sign(pointer, signingKey.pointer, EVP_sha256()) > 0 else {
            throw TransportError.openSSL(.certificate, "signing the certificate failed")
        }
        return certificate
    }

    /// A positive random 127-bit serial number.
    private static func setRandomSerial(_ certificate: OpaquePointer) throws(TransportError) {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { throw TransportError.openSSL(.certificate, "RAND_bytes failed") }
        bytes[0] &= 0x7F
        guard let number = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw TransportError.openSSL(.certificate, "BN_bin2bn failed") }
        defer { BN_free(number) }
        guard BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate)) != nil else {
            throw TransportError.openSSL(.certificate, "setting the serial number failed")
        }
    }
}
