import PushCore

extension AppConfiguration {
    /// An app for tests that never sign an APNs request (render, feedback, registrations): token
    /// auth with a key file that is never read.
    public static func test(_ bundleID: String, environment: Environment) -> AppConfiguration {
        AppConfiguration(
            bundleID: bundleID,
            environment: environment,
            apns: .token(AppConfiguration.TokenKey(keyFile: "key.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
    }
}
