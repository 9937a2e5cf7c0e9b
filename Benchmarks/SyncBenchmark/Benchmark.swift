import BenchmarkSupport
import Foundation
import JetbridgeModel

/// One invocation: its options, the records every run syncs, where runs keep their files, and the tools they start.
struct Benchmark {
    let options: Options
    let workload: Workload
    let scratch: URL
    let agentExecutable: URL
    let aggregatorExecutable: URL

    /// The SQLite mode's run (one aggregator on its own file), then its floor: the same rows into the store's tables
    /// in ONE transaction (`DirectInsert`, shared with the store benchmark), with corrections replacing the earlier
    /// revision as the store's upsert does.
    /// - Returns: The run's figures, the floor's rows per second and its CPU seconds per row.
    func sqliteMode(in directory: URL, makingSeconds: Double) throws -> (RunFigures, Double, Double) {
        let figures = try SyncRun(
            options: options, workload: workload, directory: directory, store: .sqlite, names: ["ground"],
            agentExecutable: agentExecutable, aggregatorExecutable: aggregatorExecutable
        ).perform(makingSeconds: makingSeconds)
        let total = workload.total
        let all = workload.all
        let direct = DirectInsert(path: directory.appendingPathComponent("direct.sqlite").path, upsertingOrders: true)
        let t0 = now()
        let c0 = selfCPU()
        direct.begin()
        for (record, bytes) in all { direct.insert(record, bytes: bytes) }
        direct.commit()
        let (directSeconds, directCPU) = (now() - t0, selfCPU() - c0)
        say(
            String(
                format: "direct: %@ rows in %.2f s (one transaction, sqlite3 C API); CPU %.1f s (%.2f µs/row)",
                grouped(total), directSeconds, directCPU, directCPU / Double(total) * 1e6))
        return (figures, Double(total) / directSeconds, directCPU / Double(total))
    }
}

func met(_ condition: Bool) -> String { condition ? "met" : "NOT met" }
