#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
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

int jb_set_thread_name(const char *name) {
#ifdef __linux__
    char shortened[16];
    strncpy(shortened, name, sizeof shortened - 1);
    shortened[sizeof shortened - 1] = 0;
    return pthread_setname_np(pthread_self(), shortened);
#else
    (void)name;
    return ENOSYS;
#endif
}

// MARK: Interruption (SystemSupport's `Interruption`)

enum { interruption_max_signals = 8 };
static volatile sig_atomic_t interruption_write_end = -1;
static volatile sig_atomic_t interruption_caught = 0;
static int interruption_read_end = -1;
static int interruption_signals[interruption_max_signals];
static struct sigaction interruption_previous[interruption_max_signals];
static int interruption_installed = 0;

static void interruption_handler(int signal) {
    int saved = errno;
    if (interruption_caught != 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        sigemptyset(&action.sa_mask);
        sigaction(signal, &action, NULL);
        raise(signal);
    } else {
        interruption_caught = signal;
        unsigned char byte = (unsigned char)signal;
        ssize_t written = write(interruption_write_end, &byte, 1);
        (void)written;
    }
    errno = saved;
}

void jb_interruption_restore(void) {
    for (int i = 0; i < interruption_installed; i++) {
        sigaction(interruption_signals[i], &interruption_previous[i], NULL);
    }
    interruption_installed = 0;
}

int jb_interruption_install(const int *signals, int count) {
    if (count < 0 || count > interruption_max_signals) {
        errno = EINVAL;
        return -1;
    }
    if (interruption_read_end < 0) {
        int ends[2];
        if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
        interruption_read_end = ends[0];
        interruption_write_end = ends[1];
    }
    unsigned char scratch[64];
    while (read(interruption_read_end, scratch, sizeof scratch) > 0) {
    }
    interruption_caught = 0;
    jb_interruption_restore();
    for (int i = 0; i < count; i++) {
        struct sigaction old;
        if (sigaction(signals[i], NULL, &old) != 0) goto failed;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = interruption_handler;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART;
        if (sigaction(signals[i], &action, NULL) != 0) goto failed;
        interruption_signals[interruption_installed] = signals[i];
        interruption_previous[interruption_installed] = old;
        interruption_installed++;
    }
    return interruption_read_end;
failed:;
    int code = errno;
    jb_interruption_restore();
    errno = code;
    return -1;
}

int jb_interruption_caught(void) { return interruption_caught; }

void jb_interruption_trigger(int signal) {
    interruption_caught = signal;
    unsigned char byte = (unsigned char)signal;
    ssize_t written = write(interruption_write_end, &byte, 1);
    (void)written;
}
