import AMQP
import PushCore
import Redis
import Testing

@testable import PushServiceKit

/// The crash guard's decisions and encodings, without a broker (CrashLoopTests runs it for real).
struct CrashGuardTests {
    let me = "host/100/abc"
    let other = "host/200/def"

    @Test func aRedeliveryIsASuspectOnlyWhenItsMarkNamesAnotherProcessThatLeftACrashNote() {
        let together = InProgressMark(owner: other, claim: 7, alone: false)
        let alone = InProgressMark(owner: other, claim: 8, alone: true)
        // No mark: nothing known against it.
        #expect(CrashVerdict(mark: nil, ownerCrash: nil, instance: me) == .together)
        // Its owner left no note: killed (kill -9, out of memory) or its connection dropped.
        #expect(CrashVerdict(mark: together, ownerCrash: nil, instance: me) == .together)
        #expect(CrashVerdict(mark: alone, ownerCrash: nil, instance: me) == .together)
        // This very process holds it (a dropped connection redelivered it here): not a crash.
        #expect(CrashVerdict(mark: InProgressMark(owner: me, claim: 1, alone: true), ownerCrash: "signal 04", instance: me) == .together)
        // In flight with others when its process crashed: alone next time.
        #expect(CrashVerdict(mark: together, ownerCrash: "signal 04", instance: me) == .alone(crash: "signal 04"))
        // Alone when its process crashed: the culprit.
        #expect(CrashVerdict(mark: alone, ownerCrash: "signal 04", instance: me) == .culprit(crash: "signal 04"))
    }

    @Test func marksReadBackWhatWasWrittenAndRefuseAnythingElse() {
        let mark = InProgressMark(owner: "pod-7f/1/ab cd", claim: 42, alone: true)
        #expect(mark.value == "a 42 pod-7f/1/ab cd")
        #expect(InProgressMark(value: mark.value) == mark)
        #expect(InProgressMark(value: "t 1 x") == InProgressMark(owner: "x", claim: 1, alone: false))
        for bad in ["", "a", "a 1", "a 1 ", "x 1 owner", "a -1 owner", "a one owner", "a 99999999999999999999 owner"] {
            #expect(InProgressMark(value: bad) == nil, "\(bad)")
        }
    }

    @Test func fingerprintsTellBodiesApart() {
        #expect(CrashGuard.fingerprint(Array("a".utf8)) != CrashGuard.fingerprint(Array("b".utf8)))
        #expect(CrashGuard.fingerprint([]) == "cbf29ce484222325-0")
        #expect(CrashGuard.fingerprint(Array("hello".utf8)).count == 16 + 2)
    }

    @Test func theCrashNoteIsOneSetWithAuthAndSelectAsConfiguredAndTheSignalWrittenInPlace() throws {
        let plain = CrashRecorder.commands(configuration: try RedisConfiguration(url: "redis://127.0.0.1:6379/0"), key: "push:crashed:x")
        let expected = "*5\r\n$3\r\nSET\r\n$14\r\npush:crashed:x\r\n$9\r\nsignal ##\r\n$2\r\nEX\r\n$5\r\n86400\r\n"
        #expect(String(decoding: plain.bytes, as: UTF8.self) == expected)
        #expect(plain.replies == 1)
        var bytes = plain.bytes
        bytes[plain.signalOffset] = UInt8(ascii: "0")
        bytes[plain.signalOffset + 1] = UInt8(ascii: "4")
        #expect(String(decoding: bytes, as: UTF8.self).contains("$9\r\nsignal 04\r\n"))

        // A password holding the placeholder's text cannot move where the signal is written.
        let secured = CrashRecorder.commands(
            configuration: try RedisConfiguration(url: "redis://ops:signal%20%23%23@127.0.0.1:6379/3"), key: "push:crashed:x")
        let text = String(decoding: secured.bytes, as: UTF8.self)
        #expect(text.hasPrefix("*3\r\n$4\r\nAUTH\r\n$3\r\nops\r\n$9\r\nsignal ##\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*5\r\n$3\r\nSET\r\n"))
        #expect(secured.replies == 3)
        let signalAt = text.utf8.count - "##\r\n$2\r\nEX\r\n$5\r\n86400\r\n".utf8.count
        #expect(secured.signalOffset == signalAt)
    }
}

/// What `pushctl dead` prints as a dead letter's reason.
struct DeadLetterReasonTests {
    @Test func aServicesOwnReasonComesFirst() {
        let headers: AMQPTable = [PushQueues.errorHeader: "expiration: must be 0–4102444800", "x-death": .array([.table(["reason": "rejected"])])]
        #expect(DeadLetterReason(headers: headers).description == "expiration: must be 0–4102444800")
    }

    @Test func aMessageTheBrokerParkedSaysWhyAndWhere() {
        let headers: AMQPTable = [
            "x-death": .array([.table(["reason": "delivery_limit", "queue": "push.send", "count": .int64(1)])])
        ]
        let reason = DeadLetterReason(headers: headers)
        #expect(reason.death == .init(reason: "delivery_limit", queue: "push.send", count: 1))
        #expect(reason.description.hasPrefix("parked by RabbitMQ in push.send: delivered more often than the queue's delivery limit (20)"))
        #expect(
            DeadLetterReason(headers: ["x-death": .array([.table(["reason": "expired"])])]).description
                == "parked by RabbitMQ: its time to live ran out")
    }

    @Test func noReasonAtAllIsSaid() {
        #expect(DeadLetterReason(headers: [:]).description.hasPrefix("no reason recorded"))
        #expect(DeadLetterReason(headers: ["x-death": "not an array"]).death == nil)
    }
}
