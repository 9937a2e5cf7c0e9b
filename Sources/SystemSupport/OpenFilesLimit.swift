#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`): every socket, file and pipe counts against it, so a
/// server that accepts connections of one kind must leave room for the others (``current`` sizes such shares).
package enum OpenFilesLimit {
    /// The soft limit now: how many descriptors the process may hold (`Int.max` when unlimited).
    package static var current: Int { read().soft }

    /// The hard limit: how far ``raiseToHard()`` can go (`LimitNOFILE=` in a systemd unit, `ulimit -Hn` in a shell).
    package static var hard: Int { read().hard }

    /// Raises the soft limit to the hard limit, as Go's runtime does at start: the soft limit is often 1,024 (a shell,
    /// systemd's default) while the hard one allows far more, and a server that runs out of descriptors refuses
    /// connections. Nothing in this process uses `select(2)`, which cannot watch a descriptor above 1,023.
    /// - Returns: The soft limit before and after; equal when it was already the hard limit or could not be raised.
    @discardableResult
    package static func raiseToHard() -> (before: Int, after: Int) {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return (0, 0) }
        let before = clamp(limit.rlim_cur)
        guard limit.rlim_cur < limit.rlim_max else { return (before, before) }
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(resource, &limit) == 0 else { return (before, before) }
        return (before, read().soft)
    }

    private static var resource: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }

    private static func read() -> (soft: Int, hard: Int) {
        var limit = rlimit()
        // getrlimit fails only for a bad resource or pointer; 1,024 is Linux's default soft limit.
        guard getrlimit(resource, &limit) == 0 else { return (1_024, 1_024) }
        return (clamp(limit.rlim_cur), clamp(limit.rlim_max))
    }

    private static func clamp(_ value: rlim_t) -> Int {
        // RLIM_INFINITY is all ones (Swift cannot import its C definition, `(rlim_t) -1`).
        value == rlim_t.max ? Int.max : Int(clamping: value)
    }
}
