#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include "CSystemCalls.h"

int jb_syncfs(int fd) {
#ifdef __linux__
    return syncfs(fd);
#else
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}
