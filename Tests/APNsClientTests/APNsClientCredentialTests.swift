import APNs
import Foundation
import Logging
import TestSupport
import Testing

/// Certificate auth (.pem and .p12) and the errors bad credential files give.
@Suite("APNs client credentials")
struct APNsClientCredentialTests {
    /// A CA, a client certificate it signed (PEM and .p12 with password "secret"), and one it did not.
    struct Certificates {
        let directory: URL
        var caFile: String { directory.appendingPathComponent("ca.pem").path }
        var certificateFile: String { directory.appendingPathComponent("client.pem").path }
        var keyFile: String { directory.appendingPathComponent("client.key").path }
        var pkcs12File: String { directory.appendingPathComponent("client.p12").path }
        var strangerCertificateFile: String { directory.appendingPathComponent("stranger.pem").path }
        var strangerKeyFile: String { directory.appendingPathComponent("stranger.key").path }

        static func make() async throws -> Certificates {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-certs-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let certificates = Certificates(directory: directory)
            let path = { (name: String) in directory.appendingPathComponent(name).path }
            let steps: [[String]] = [
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("ca.key"),
                    "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=Push Test CA",
                ],
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("client.key"),
                    "-out", path("client.csr"), "-subj", "/UID=com.example.app/CN=Apple Push Services: com.example.app",
                ],
                [
                    "x509", "-req", "-in", path("client.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-set_serial", "2",
                    "-out", path("client.pem"), "-days", "2",
                ],
                [
                    "pkcs12", "-export", "-in", path("client.pem"), "-inkey", path("client.key"), "-out", path("client.p12"),
                    "-passout", "pass:secret",
                ],
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("stranger.key"),
                    "-out", path("stranger.pem"), "-days", "2", "-subj", "/UID=com.example.app/CN=Stranger",
                ],
            ]
            for step in steps {
                let result = try await run(["/usr/bin/openssl"] + step)
                guard result.status == 0 else { throw ChildProcessError("openssl \(step.joined(separator: " ")): \(result.output)") }
            }
            return certificates
        }
    }

    @Test func certificateAuthWorksFromPEMAndFromP12() async throws {
        let certificates = try await Certificates.make()
        defer { try? FileManager.default.removeItem(at: certificates.directory) }
        let sandbox = try await SandboxProcess(arguments: ["--client-ca", certificates.caFile])

        let pem = try makeClient(
            sandbox,
            credentials: .certificate(
                APNsClientCertificate(source: .pem(certificateFile: certificates.certificateFile, privateKeyFile: certificates.keyFile))))
        let viaPEM = try await pem.send(alert())
        #expect(viaPEM.status == 200, "\(viaPEM)")
        #expect(pem.providerTokensMinted == 0)
        await pem.shutdown()

        let p12 = try makeClient(
            sandbox, credentials: .certificate(APNsClientCertificate(source: .pkcs12(file: certificates.pkcs12File, password: "secret"))))
        #expect(try await p12.send(alert()).status == 200)
        await p12.shutdown()

        // A certificate the server's CA did not sign: APNs' 403 BadCertificate, a credential problem.
        let stranger = try makeClient(
            sandbox,
            credentials: .certificate(
                APNsClientCertificate(
                    source: .pem(certificateFile: certificates.strangerCertificateFile, privateKeyFile: certificates.strangerKeyFile))))
        let refused = try await stranger.send(alert())
        #expect(refused.status == 403)
        #expect(refused.reason == .badCertificate)
        #expect(refused.outcome == .credentialProblem)
        await stranger.shutdown()
    }

    @Test func badCertificateFilesAndPasswordsGetClearErrors() async throws {
        let certificates = try await Certificates.make()
        defer { try? FileManager.default.removeItem(at: certificates.directory) }
        let sandbox = try await SandboxProcess()
        func failure(_ source: APNsClientCertificate.Source) -> APNsClientError? {
            do {
                _ = try makeClient(sandbox, credentials: .certificate(APNsClientCertificate(source: source)))
                return nil
            } catch let error as APNsClientError {
                return error
            } catch {
                return APNsClientError(.protocolError, "\(error)")
            }
        }
        let wrongPassword = try #require(failure(.pkcs12(file: certificates.pkcs12File, password: "guess")))
        #expect(wrongPassword.code == .credentials)
        #expect(wrongPassword.message.contains("wrong password"), "\(wrongPassword)")
        #expect(wrongPassword.message.contains("client.p12"))

        let notP12 = try #require(failure(.pkcs12(file: certificates.caFile, password: "secret")))
        #expect(notP12.message.contains("is not a PKCS#12"), "\(notP12)")

        let missing = try #require(failure(.pkcs12(file: "/nonexistent/cert.p12", password: "")))
        #expect(missing.message.contains("cannot read"), "\(missing)")

        let mismatched = try #require(failure(.pem(certificateFile: certificates.certificateFile, privateKeyFile: certificates.strangerKeyFile)))
        #expect(mismatched.message.contains("does not belong"), "\(mismatched)")

        let keyAsCertificate = try #require(failure(.pem(certificateFile: certificates.keyFile, privateKeyFile: certificates.keyFile)))
        #expect(keyAsCertificate.message.contains("is not a PEM certificate"), "\(keyAsCertificate)")

        var configuration = APNsClientConfiguration(
            endpoint: .production, credentials: .token(SandboxProcess.signingKey), caFile: "/nonexistent/ca.pem")
        #expect(throws: APNsClientError.self) { try APNsClient(configuration: configuration, logger: .init(label: "test")) }
        configuration.caFile = certificates.keyFile
        do {
            _ = try APNsClient(configuration: configuration, logger: .init(label: "test"))
            Issue.record("a key file was accepted as a CA file")
        } catch {
            #expect(error.message.contains("holds no PEM certificate"), "\(error)")
        }
    }

    @Test func badSigningKeysGetClearErrors() throws {
        #expect(throws: APNsCredentialError.self) { try APNsSigningKey(p8: "not a key", keyID: "ABC123DEFG", teamID: "DEF123GHIJ") }
        do {
            _ = try APNsSigningKey(p8File: "/nonexistent/AuthKey.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
            Issue.record("a missing .p8 file loaded")
        } catch {
            #expect(error.message.contains("/nonexistent/AuthKey.p8"))
        }
        do {
            _ = try APNsSigningKey(p8: SandboxProcess.signingKey.publicKeyPEM, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
            Issue.record("a public key loaded as a .p8")
        } catch {
            #expect(error.message.contains("PRIVATE KEY"))
        }
        do {
            _ = try APNsSigningKey.ephemeral(keyID: "short", teamID: "DEF123GHIJ")
            Issue.record("a bad key id was accepted")
        } catch {
            #expect(error.message.contains("key id"))
        }
    }
}
