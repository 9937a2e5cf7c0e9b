import Foundation

/// Runs `body(0..<count)` on threads of their own (blocking process waits must not occupy Swift's cooperative
/// pool, which has two threads here) and returns the results in index order.
func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) async throws -> [T] {
    let results = ResultBox<T>(count: count)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread {
                results.set(index, Result { try body(index) })
                group.leave()
            }.start()
        }
        group.notify(queue: .global()) { continuation.resume() }
    }
    return try results.values()
}

private final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<T, any Error>?]

    init(count: Int) { results = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ result: Result<T, any Error>) {
        lock.withLock { results[index] = result }
    }

    func values() throws -> [T] {
        try lock.withLock { try results.map { try $0!.get() } }
    }
}
