#ifndef C_SYSTEM_CALLS_H
#define C_SYSTEM_CALLS_H

/// `syncfs(2)` on the file system that holds `fd`: one flush of everything written to it, where an `fsync` per file
/// would flush once per file. A GNU extension, which Swift's Glibc module does not export. Returns 0, or -1 with
/// `errno` set; `ENOSYS` where the system has no `syncfs`.
int jb_syncfs(int fd);

/// Names the calling thread (`top -H`, `/proc/<pid>/task/*/comm`); the kernel keeps at most 15 bytes. A GNU
/// extension (`pthread_setname_np`), which Swift's Glibc module does not export. Returns 0 or an error number.
int jb_set_thread_name(const char *name);

/// Catches `signals` (at most 8: SIGINT and SIGTERM) for a command reading a long input. The first one caught writes
/// its number into a pipe, whose read end (non-blocking, close-on-exec) this returns: readable from then on. A second
/// one ends the process by that signal's default action, as if nothing had caught it (a stuck command still stops).
/// A signal that was ignored when this is called stays ignored (a job a shell started in the background). In C
/// because a signal handler may only call async-signal-safe functions; it keeps `errno`. One pipe per process, never
/// closed (a handler running on another thread may still write to it); each call starts with it empty. Returns the
/// read end, or -1 with `errno` set (nothing is left installed).
int jb_interruption_install(const int *signals, int count);

/// Puts back the actions the signals of the last `jb_interruption_install` had before it.
void jb_interruption_restore(void);

/// The signal caught since the last `jb_interruption_install`, or 0. The pipe is not read: it stays readable.
int jb_interruption_caught(void);

/// Writes `signal` into the pipe as the handler does (tests).
void jb_interruption_trigger(int signal);

#endif
