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

extension APNsClientConfiguration {
    /// The client settings for one app and environment.
    ///
    /// - Throws: ``APNs/APNsCredentialError`` for an unusable `.p8`, ``APNs/APNsClientError`` for an
    ///   unusable endpoint.
    public static func forApp(
        _ app: AppConfiguration,
        environment: AppConfiguration.Environment,
        endpointOverride: URL?,
        caFile: String?,
        send: SendConfiguration
    ) throws -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(
            endpoint: try APNsEndpoint.forEnvironment(environment, override: endpointOverride),
            credentials: try APNsCredentials(app.apns),
            caFile: caFile
        )
        configuration.connections = send.connections
        configuration.requestTimeout = send.requestTimeout
        return configuration
    }
}
