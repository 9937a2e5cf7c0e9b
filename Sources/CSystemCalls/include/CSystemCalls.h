#ifndef C_SYSTEM_CALLS_H
#define C_SYSTEM_CALLS_H

/// `syncfs(2)` on the file system that holds `fd`: one flush of everything written to it, where an `fsync` per file
/// would flush once per file. A GNU extension, which Swift's Glibc module does not export. Returns 0, or -1 with
/// `errno` set; `ENOSYS` where the system has no `syncfs`.
int jb_syncfs(int fd);

#endif
