/// The notification body, encoded with JSONEncoder for every request as APNSwift does. It encodes
/// to the bytes `pushctl bench` sends:
/// `{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushctl bench"},"sound":"default"}}`.
struct AlertPayload: Encodable, Sendable {
    struct APS: Encodable, Sendable {
        struct Alert: Encodable, Sendable {
            var title: String
            var body: String
        }
        var alert: Alert
        var sound: String
    }
    var aps: APS

    static let benchmark = AlertPayload(aps: APS(alert: APS.Alert(title: "Benchmark", body: "Hello from pushctl bench"), sound: "default"))
}
