import COpenSSL
import Glibc

/// What an operator needs to know of a client certificate: whom it names and when it stops working.
///
/// APNs certificates name the app in their subject: `UID=<bundle id>, CN=Apple Push Services:
/// <bundle id>, OU=<team id>, …`.
public struct TLSCertificateSummary: Sendable, Equatable {
    /// The subject, RFC 2253 style (`CN=Apple Push Services: com.example.app,UID=com.example.app,…`).
    public var subject: String
    /// The subject's common name (`CN`), if any.
    public var commonName: String?
    /// The subject's user id (`UID`, OID 0.9.2342.19200300.100.1.1): the bundle id in APNs certificates.
    public var userID: String?
    /// Validity, in seconds since 1970.
    public var notBefore: Int64
    public var notAfter: Int64

    public init(subject: String, commonName: String?, userID: String?, notBefore: Int64, notAfter: Int64) {
        self.subject = subject
        self.commonName = commonName
        self.userID = userID
        self.notBefore = notBefore
        self.notAfter = notAfter
    }
}

extension TLSClientIdentity {
    /// Loads the identity as a client would (so a wrong password, a key that does not belong to the
    /// certificate or an unreadable file fail here with the same ``TransportError``) and summarises
    /// its certificate.
    public func certificateSummary() throws(TransportError) -> TLSCertificateSummary {
        let context = try TLSContext.client(trusting: nil, identity: self)
        // The certificate is the context's: keep the context alive while it is read.
        return try withExtendedLifetime(context) { () throws(TransportError) -> TLSCertificateSummary in
            try Self.summary(of: context)
        }
    }

    private static func summary(of context: TLSContext) throws(TransportError) -> TLSCertificateSummary {
        guard let certificate = SSL_CTX_get0_certificate(context.pointer) else {
            throw TransportError(.certificate, "the credentials hold no certificate")
        }
        guard let name = X509_get_subject_name(certificate) else {
            throw TransportError(.certificate, "the certificate has no subject")
        }
        guard let notBefore = seconds(X509_get0_notBefore(certificate)), let notAfter = seconds(X509_get0_notAfter(certificate)) else {
            throw TransportError(.certificate, "the certificate's validity dates cannot be read")
        }
        return TLSCertificateSummary(
            subject: rfc2253(name), commonName: entry(name, NID_commonName), userID: entry(name, NID_userId),
            notBefore: notBefore, notAfter: notAfter)
    }

    private static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func entry(_ name: OpaquePointer, _ nid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 512)
        let length = X509_NAME_get_text_by_NID(name, nid, &buffer, Int32(buffer.count))
        guard length >= 0 else { return nil }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func rfc2253(_ name: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, push_XN_FLAG_RFC2253()) >= 0 else { return "" }
        var data: UnsafeMutablePointer<CChar>?
        let length = push_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }
}
