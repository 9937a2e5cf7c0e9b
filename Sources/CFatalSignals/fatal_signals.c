// The fatal-signal handler, in C because a signal handler may only call async-signal-safe functions and must not
// allocate; everything it needs is fixed at install time. See include/CFatalSignals.h and FatalSignals.swift.
#define _GNU_SOURCE
#include "CFatalSignals.h"

#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static const int fatal_signals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP};
#define FATAL_SIGNAL_COUNT (sizeof(fatal_signals) / sizeof(fatal_signals[0]))

static struct sigaction previous[FATAL_SIGNAL_COUNT];
static char messages[FATAL_SIGNAL_COUNT][256];
static int message_lengths[FATAL_SIGNAL_COUNT];
static int watchdog = 10;
static int chain = 0;

static const char *signal_name(int signal) {
    switch (signal) {
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGTRAP: return "SIGTRAP";
    default: return "a fatal signal";
    }
}

static void write_all(const char *text, size_t length) {
    while (length > 0) {
        ssize_t written = write(2, text, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        text += written;
        length -= (size_t)written;
    }
}

static int parse_int(const char *text, int *value) {
    int result = 0, digits = 0;
    while (*text >= '0' && *text <= '9') {
        result = result * 10 + (*text - '0');
        text++;
        digits++;
    }
    *value = result;
    return digits > 0;
}

/// Kills every process whose parent is `parent` (the runtime's `swift-backtrace` helper, which otherwise waits for
/// its target for good once the target is gone). Raw system calls into fixed buffers: this runs in a forked child of
/// a multithreaded process, where malloc may be locked.
static void kill_children_of(pid_t parent) {
    int directory = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0) return;
    char buffer[4096];
    for (;;) {
        long count = syscall(SYS_getdents64, directory, buffer, sizeof(buffer));
        if (count <= 0) break;
        for (long offset = 0; offset < count;) {
            struct linux_dirent64_view {
                unsigned long long inode;
                long long next;
                unsigned short length;
                unsigned char type;
                char name[];
            } *entry = (void *)(buffer + offset);
            offset += entry->length;
            int pid;
            if (!parse_int(entry->name, &pid) || pid <= 1) continue;
            char path[64];
            int path_length = snprintf(path, sizeof(path), "/proc/%d/stat", pid);
            if (path_length <= 0) continue;
            int stat_file = open(path, O_RDONLY | O_CLOEXEC);
            if (stat_file < 0) continue;
            char stat[512];
            ssize_t read_count = read(stat_file, stat, sizeof(stat) - 1);
            close(stat_file);
            if (read_count <= 0) continue;
            stat[read_count] = 0;
            // "pid (comm) state ppid ...": the parent follows the last ')' and the state.
            char *close_paren = strrchr(stat, ')');
            if (!close_paren || close_paren[1] != ' ' || close_paren[2] == 0 || close_paren[3] != ' ') continue;
            int ppid;
            if (parse_int(close_paren + 4, &ppid) && ppid == parent) kill(pid, SIGKILL);
        }
    }
    close(directory);
}

/// A child that ends `parent` (and its other children) if it still runs after `watchdog` seconds, and ends itself
/// with its parent.
static void start_watchdog(void) {
    pid_t parent = getpid();
    pid_t child = fork();
    if (child != 0) return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    for (int second = 0; second < watchdog; second++) {
        sleep(1);
        if (getppid() != parent) _exit(0);
    }
    static const char line[] = "the backtrace did not finish in time; the process is ended\n";
    write_all(line, sizeof(line) - 1);
    // The helper first (it holds the process's inherited descriptors and would wait for its target forever), but
    // not this child itself.
    kill_children_of(parent);
    kill(parent, SIGKILL);
    _exit(0);
}

static void handler(int signal, siginfo_t *info, void *context) {
    int index = -1;
    for (size_t i = 0; i < FATAL_SIGNAL_COUNT; i++) {
        if (fatal_signals[i] == signal) index = (int)i;
    }
    if (index >= 0) write_all(messages[index], (size_t)message_lengths[index]);
    if (index >= 0 && chain) {
        start_watchdog();
        struct sigaction *before = &previous[index];
        if (before->sa_flags & SA_SIGINFO) {
            if (before->sa_sigaction) before->sa_sigaction(signal, info, context);
        } else if (before->sa_handler != SIG_DFL && before->sa_handler != SIG_IGN) {
            before->sa_handler(signal);
        }
    } else {
        static const char header[] =
            "backtrace of the crashing thread (addresses are binary+offset; `addr2line -f -C -e BINARY OFFSET` "
            "names them; SWIFT_BACKTRACE=enable=yes gives the Swift runtime's full backtrace instead):\n";
        write_all(header, sizeof(header) - 1);
        void *frames[64];
        int count = backtrace(frames, 64);
        backtrace_symbols_fd(frames, count, 2);
    }
    // Whatever the runtime did, end with the signal's own default action.
    struct sigaction default_action;
    memset(&default_action, 0, sizeof(default_action));
    default_action.sa_handler = SIG_DFL;
    sigaction(signal, &default_action, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal);
    pthread_sigmask(SIG_UNBLOCK, &only, NULL);
    raise(signal);
    _exit(128 + signal);
}

void jb_fatal_signals_install(const char *program, int watchdog_seconds, int chain_runtime) {
    watchdog = watchdog_seconds < 1 ? 1 : watchdog_seconds;
    chain = chain_runtime;
    // backtrace() loads libgcc's unwinder on its first call, which allocates: do it now, not in the handler.
    void *warm[4];
    backtrace(warm, 4);
    for (size_t i = 0; i < FATAL_SIGNAL_COUNT; i++) {
        int signal = fatal_signals[i];
        message_lengths[i] = chain
            ? snprintf(
                messages[i], sizeof(messages[i]),
                "%s: fatal signal %s (%d); the process ends after the Swift runtime's backtrace, in at most %d s\n",
                program, signal_name(signal), signal, watchdog)
            : snprintf(
                messages[i], sizeof(messages[i]), "%s: fatal signal %s (%d); the process ends now\n", program,
                signal_name(signal), signal);
        if (message_lengths[i] < 0) message_lengths[i] = 0;
        if (message_lengths[i] >= (int)sizeof(messages[i])) message_lengths[i] = sizeof(messages[i]) - 1;
        sigaction(signal, NULL, &previous[i]);
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_sigaction = handler;
        // The runtime's flags (its alternate stack among them) and mask: a full mask made its backtrace fault.
        action.sa_flags = previous[i].sa_flags | SA_SIGINFO | SA_ONSTACK;
        action.sa_mask = previous[i].sa_mask;
        sigaction(signal, &action, NULL);
    }
}
