#ifndef C_FATAL_SIGNALS_H
#define C_FATAL_SIGNALS_H

/// Installs the fatal-signal handler of SystemSupport's `FatalSignals` (see FatalSignals.swift for the why).
///
/// For SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGTRAP: one line on standard error naming `program` and the
/// signal; then either this process's own backtrace of the crashing thread (`chain_runtime` 0: glibc's
/// `backtrace_symbols_fd`, no other process involved) or the Swift runtime's handler that was installed before
/// (`chain_runtime` 1: its `swift-backtrace` helper, full symbolication, bounded by a watchdog that after
/// `watchdog_seconds` kills the helper and the process); then the default action and the signal again, so the process
/// ends with the signal's own status however the signal came.
///
/// Call once, early in `main`, before other threads start. Not thread-safe to call twice.
void jb_fatal_signals_install(const char *program, int watchdog_seconds, int chain_runtime);

#endif
