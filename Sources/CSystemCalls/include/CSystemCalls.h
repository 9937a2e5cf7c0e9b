#ifndef C_SYSTEM_CALLS_H
#define C_SYSTEM_CALLS_H

/// `syncfs(2)` on the file system that holds `fd`: one flush of everything written to it, where an `fsync` per file
/// would flush once per file. A GNU extension, which Swift's Glibc module does not export. Returns 0, or -1 with
/// `errno` set; `ENOSYS` where the system has no `syncfs`.
int jb_syncfs(int fd);

/// Names the calling thread (`top -H`, `/proc/<pid>/task/*/comm`); the kernel keeps at most 15 bytes. A GNU
/// extension (`pthread_setname_np`), which Swift's Glibc module does not export. Returns 0 or an error number.
int jb_set_thread_name(const char *name);

#endif
