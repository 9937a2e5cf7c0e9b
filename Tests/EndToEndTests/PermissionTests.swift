import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 16, item 6: captured data is private to the device's account.
@Suite("Permissions: the agent's home is 0700 and its files 0600")
struct PermissionTests {
    /// Every entry under `root` (root included) with its permission bits, by path relative to `root`.
    static func modes(_ root: URL) -> [String: mode_t] {
        var result: [String: mode_t] = [:]
        func visit(_ path: String, _ relative: String) {
            var info = stat()
            guard lstat(path, &info) == 0 else { return }
            result[relative] = info.st_mode & 0o7777
            if info.st_mode & S_IFMT == S_IFDIR {
                for entry in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                    visit(path + "/" + entry, relative.isEmpty ? entry : relative + "/" + entry)
                }
            }
        }
        visit(root.path, "")
        return result
    }

    static func isPrivate(_ modes: [String: mode_t], _ root: URL) -> [String] {
        modes.compactMap { path, mode in
            var info = stat()
            lstat(root.path + (path.isEmpty ? "" : "/" + path), &info)
            let wanted: mode_t = info.st_mode & S_IFMT == S_IFDIR ? 0o700 : 0o600
            return mode == wanted ? nil : "\(path.isEmpty ? "<home>" : path): \(String(mode, radix: 8))"
        }
    }

    @Test("a new home, its queue, ledger, locks and keys are owner-only, whatever the umask")
    func newHome() throws {
        let sandbox = try AgentSandbox()
        let previous = umask(0o022)
        defer { umask(previous) }
        let order = try sandbox.agent(["order", "--seat", "17B", "--item", "Peanuts=2"])
        #expect(order.status == 0, "\(order)")
        let id = try #require(order.orderID)
        #expect(try sandbox.agent(["order", "--amend", id, "--item", "Chips"]).status == 0)
        #expect(try sandbox.agent(["keys", "generate"]).status == 0)
        let modes = Self.modes(sandbox.home)
        #expect(modes.keys.contains("queue"))
        #expect(modes.keys.contains { $0.hasPrefix("orders/") && $0.hasSuffix(".msgpack") })
        #expect(modes.keys.contains("keys/device.key"))
        #expect(modes.count >= 8, "\(modes)")
        #expect(Self.isPrivate(modes, sandbox.home) == [])
    }

    @Test("a home an earlier version left 0755 and 0644 is tightened on the next run")
    func olderHomeIsTightened() throws {
        let sandbox = try AgentSandbox()
        #expect(try sandbox.agent(["order", "--seat", "17B", "--item", "Peanuts=2"]).status == 0)
        #expect(try sandbox.agent(["keys", "generate"]).status == 0)
        for (path, mode) in Self.modes(sandbox.home) {
            let full = sandbox.home.path + (path.isEmpty ? "" : "/" + path)
            chmod(full, mode == 0o700 ? 0o755 : 0o644)
        }
        #expect(Self.isPrivate(Self.modes(sandbox.home), sandbox.home).count >= 8)
        #expect(try sandbox.agent(["status"]).status == 0)
        #expect(Self.isPrivate(Self.modes(sandbox.home), sandbox.home) == [])
    }
}
