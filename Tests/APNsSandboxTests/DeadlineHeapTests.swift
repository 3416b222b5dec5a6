import Testing

@testable import APNsSandbox

@Suite("DeadlineHeap: the event loop's timers")
struct DeadlineHeapTests {
    @Test func popsDueElementsInDeadlineThenInsertionOrder() {
        var heap = DeadlineHeap<String>()
        heap.insert("c", deadline: 30)
        heap.insert("a", deadline: 10)
        heap.insert("b1", deadline: 20)
        heap.insert("b2", deadline: 20)
        #expect(heap.nextDeadline == 10)
        #expect(heap.popDue(now: 5) == nil)
        #expect(heap.popDue(now: 25) == "a")
        #expect(heap.popDue(now: 25) == "b1")
        #expect(heap.popDue(now: 25) == "b2")
        #expect(heap.popDue(now: 25) == nil)
        #expect(heap.popDue(now: 30) == "c")
        #expect(heap.isEmpty)
    }

    @Test func staysOrderedUnderRandomInsertions() {
        var heap = DeadlineHeap<UInt64>()
        var random = FastRandom(seed: 3)
        var deadlines: [UInt64] = []
        for _ in 0..<2000 {
            let deadline = random.next() % 500
            deadlines.append(deadline)
            heap.insert(deadline, deadline: deadline)
        }
        var popped: [UInt64] = []
        while let next = heap.popDue(now: .max) { popped.append(next) }
        #expect(popped == deadlines.sorted())
    }
}
