public import APNs
public import Foundation
public import PushCore

extension APNsCredentials {
    /// The apps file's credentials as the APNs client takes them: token auth reads and checks the
    /// `.p8` key now; certificates are loaded by the client when it connects.
    public init(_ credentials: AppConfiguration.APNsCredentials) throws(APNsCredentialError) {
        switch credentials {
        case .token(let key):
            self = .token(try APNsSigningKey(p8File: key.keyFile, keyID: key.keyID, teamID: key.teamID))
        case .pkcs12(let certificateFile, let password):
            self = .certificate(APNsClientCertificate(source: .pkcs12(file: certificateFile, password: password)))
        case .pem(let certificateFile, let privateKeyFile):
            self = .certificate(APNsClientCertificate(source: .pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile)))
        }
    }
}

extension APNsEndpoint {
    /// Where an app's notifications for devices of `environment` go: `override`
    /// (`PUSH_APNS_ENDPOINT`, e.g. apns-sandbox) when set, else Apple's production or development servers.
    public static func forEnvironment(_ environment: AppConfiguration.Environment, override: URL?) throws(APNsClientError) -> APNsEndpoint {
        if let override {
            return try APNsEndpoint(url: override.absoluteString)
        }
        switch environment {
        case .production: return .production
        case .sandbox: return .development
        }
    }
}

/// What start-up should warn about in the APNs endpoint settings: an override that sends production
/// apps' pushes somewhere other than Apple, and a CA file that is ignored because nothing overrides
/// Apple's servers.
public func apnsEndpointWarnings(apps: AppsFile, endpointOverride: URL?, caFile: String?) -> [String] {
    var warnings: [String] = []
    if let endpointOverride {
        let production = apps.bundleIDs.sorted().filter { apps.app(bundleID: $0)?.environment == .production }
        if !production.isEmpty {
            warnings.append(
                "PUSH_APNS_ENDPOINT \(endpointOverride.absoluteString) replaces Apple's servers for production apps too (\(production.joined(separator: ", "))): their pushes do not reach devices"
            )
        }
    } else if let caFile {
        warnings.append("PUSH_APNS_CA_FILE \(caFile) is not used: it is trusted only for PUSH_APNS_ENDPOINT, which is not set")
    }
    return warnings
}

extension APNsClientConfiguration {
    /// The client settings for one app and environment. `caFile` (`PUSH_APNS_CA_FILE`, e.g.
    /// apns-sandbox's CA) is trusted only for `endpointOverride`: a CA that can sign any name must never
    /// be trusted for Apple's servers.
    ///
    /// - Throws: ``APNs/APNsCredentialError`` for an unusable `.p8`, ``APNs/APNsClientError`` for an
    ///   unusable endpoint.
    public static func forApp(
        _ app: AppConfiguration,
        environment: AppConfiguration.Environment,
        endpointOverride: URL?,
        caFile: String?,
        proxy: APNsProxy? = nil,
        send: SendConfiguration
    ) throws -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(
            endpoint: try APNsEndpoint.forEnvironment(environment, override: endpointOverride),
            credentials: try APNsCredentials(app.apns),
            caFile: endpointOverride == nil ? nil : caFile
        )
        configuration.proxy = proxy
        configuration.connections = send.connections
        configuration.requestTimeout = send.requestTimeout
        return configuration
    }
}
