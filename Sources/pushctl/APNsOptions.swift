import APNs
import ArgumentParser
import Foundation

/// Where and as whom `pushctl send` and `pushctl bench` talk to APNs.
struct APNsOptions: ParsableArguments {
    @Option(help: "APNs endpoint URL, e.g. https://127.0.0.1:2197 for apns-sandbox (overrides --environment).")
    var endpoint: String?

    @Option(help: "production (api.push.apple.com) or sandbox (api.sandbox.push.apple.com).")
    var environment: String = "production"

    @Option(help: "Extra CA certificates (PEM) to trust, e.g. apns-sandbox's (default: PUSH_APNS_CA_FILE).")
    var caFile: String?

    @Option(help: "Token auth: the .p8 signing key file.")
    var keyFile: String?

    @Option(help: "Token auth: the key id (10 characters).")
    var keyID: String?

    @Option(help: "Token auth: the team id (10 characters).")
    var teamID: String?

    @Option(help: "Certificate auth: a .p12 file, or a PEM certificate (with --private-key).")
    var certificate: String?

    @Option(help: "Certificate auth: the .p12 file's password.")
    var certificatePassword: String = ""

    @Option(help: "Certificate auth: the PEM private key belonging to --certificate.")
    var privateKey: String?

    /// The endpoint the options name.
    func resolvedEndpoint() throws -> APNsEndpoint {
        if let endpoint { return try APNsEndpoint(url: endpoint) }
        switch environment {
        case "production": return .production
        case "sandbox", "development": return .development
        default: throw ValidationError("--environment must be production or sandbox (got '\(environment)')")
        }
    }

    /// The credentials the options name; `ephemeralKeyAllowed` makes up a signing key when none is
    /// given (apns-sandbox without --public-key accepts any well-formed token).
    func credentials(ephemeralKeyAllowed: Bool) throws -> APNsCredentials {
        if let certificate {
            guard keyFile == nil else { throw ValidationError("give either --certificate or --key-file, not both") }
            if certificate.lowercased().hasSuffix(".p12") || certificate.lowercased().hasSuffix(".pfx") {
                return .certificate(APNsClientCertificate(source: .pkcs12(file: certificate, password: certificatePassword)))
            }
            guard let privateKey else { throw ValidationError("--certificate with a PEM file needs --private-key") }
            return .certificate(APNsClientCertificate(source: .pem(certificateFile: certificate, privateKeyFile: privateKey)))
        }
        if let keyFile {
            guard let keyID, let teamID else { throw ValidationError("--key-file needs --key-id and --team-id") }
            return .token(try APNsSigningKey(p8File: keyFile, keyID: keyID, teamID: teamID))
        }
        guard ephemeralKeyAllowed else {
            throw ValidationError("give --key-file with --key-id and --team-id (token auth), or --certificate (certificate auth)")
        }
        return .token(try APNsSigningKey.ephemeral(keyID: keyID ?? "BENCHKEY01", teamID: teamID ?? "BENCHTEAM1"))
    }

    func clientConfiguration(ephemeralKeyAllowed: Bool) throws -> APNsClientConfiguration {
        APNsClientConfiguration(
            endpoint: try resolvedEndpoint(),
            credentials: try credentials(ephemeralKeyAllowed: ephemeralKeyAllowed),
            caFile: caFile ?? ProcessInfo.processInfo.environment["PUSH_APNS_CA_FILE"]
        )
    }
}
