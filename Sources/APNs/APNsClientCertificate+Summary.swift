public import HTTP2Transport

extension APNsClientCertificate {
    /// The certificate's subject and validity, loaded as the client would load it: a wrong
    /// password, a key that does not belong to the certificate or an unreadable file throw
    /// ``APNsClientError/Code/credentials`` with the same message the client would give.
    public func summary() throws(APNsClientError) -> TLSCertificateSummary {
        let identity: TLSClientIdentity =
            switch source {
            case .pem(let certificateFile, let privateKeyFile): .pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile)
            case .pkcs12(let file, let password): .pkcs12(file: file, password: password)
            }
        do {
            return try identity.certificateSummary()
        } catch {
            throw APNsClientError(.credentials, error.message)
        }
    }
}
