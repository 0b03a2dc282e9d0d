/* A fault injector for compactlog's storage: an LD_PRELOAD library that fails one system call
 * that writes, syncs, truncates, renames or creates a file under a directory, the way a full or
 * failing disk does (ENOSPC, EIO, or a short write followed by ENOSPC).
 *
 * Calls are counted only when their file is under FAULT_DIR. With FAULT_LOG set every counted
 * call is listed there ("<syscall> <path>", one line each: the campaign's census of injection
 * points). With FAULT_SYSCALL, FAULT_GLOB and FAULT_AT set, the FAULT_AT-th call of that system
 * call whose path matches the fnmatch(3) glob fails as FAULT_KIND says (enospc, eio, short), once;
 * FAULT_FIRED names a file created when it does, so the campaign knows the fault happened.
 * FAULT_KIND=kill kills the process there instead (SIGKILL, before the call is made): a kill -9
 * at that point, for the offline campaign's crash trials.
 * Everything else passes through to libc unchanged, and so does every call made on an alternate
 * signal stack: Python's signal handler writes the signal number to its wakeup fd from there,
 * and the few kilobytes faulthandler allocates for that stack cannot hold this library's path
 * buffers (a SIGTERM's write overran it into the heap, and the broker under test died of "double
 * free or corruption" at its exit).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static const char *fault_dir, *fault_log, *fault_syscall, *fault_glob, *fault_kind, *fault_fired;
static long fault_at;
static size_t dir_len;
static long seen;          /* matching calls so far (atomic) */
static int fired;          /* the fault happened (atomic) */
static int full_after_short; /* a short write leaves the disk full for the next write */

__attribute__((constructor)) static void init(void) {
    fault_dir = getenv("FAULT_DIR");
    fault_log = getenv("FAULT_LOG");
    fault_syscall = getenv("FAULT_SYSCALL");
    fault_glob = getenv("FAULT_GLOB");
    fault_kind = getenv("FAULT_KIND");
    fault_fired = getenv("FAULT_FIRED");
    const char *at = getenv("FAULT_AT");
    fault_at = at ? atol(at) : 0;
    dir_len = fault_dir ? strlen(fault_dir) : 0;
}

static int fd_path(int fd, char *out, size_t n) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, out, n - 1);
    if (k < 0) return 0;
    out[k] = 0;
    return 1;
}

static int under_dir(const char *path) {
    return fault_dir && path && strncmp(path, fault_dir, dir_len) == 0 &&
           (path[dir_len] == '/' || path[dir_len] == 0);
}

static void census(const char *name, const char *path) {
    if (!fault_log) return;
    char line[4200];
    int n = snprintf(line, sizeof line, "%s %s\n", name, path);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, fault_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    syscall(SYS_write, fd, line, (size_t)n);
    syscall(SYS_close, fd);
}

static void mark_fired(void) {
    __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
    if (fault_fired) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, fault_fired, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) syscall(SYS_close, fd);
    }
}

/* 0: pass; 1: fail with errno set; 2: short write (half of it) */
static int decide(const char *name, const char *path) {
    if (!under_dir(path)) return 0;
    census(name, path);
    if (__atomic_load_n(&full_after_short, __ATOMIC_SEQ_CST) && strstr(name, "write")) {
        __atomic_store_n(&full_after_short, 0, __ATOMIC_SEQ_CST);
        errno = ENOSPC;
        return 1;
    }
    if (!fault_syscall || !fault_at || __atomic_load_n(&fired, __ATOMIC_SEQ_CST)) return 0;
    if (strcmp(name, fault_syscall) != 0) return 0;
    if (fault_glob && fnmatch(fault_glob, path, 0) != 0) return 0;
    if (__atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) != fault_at) return 0;
    mark_fired();
    if (fault_kind && strcmp(fault_kind, "kill") == 0) {
        syscall(SYS_kill, (pid_t)syscall(SYS_getpid), SIGKILL);
    }
    if (fault_kind && strcmp(fault_kind, "short") == 0 && strstr(name, "write")) {
        __atomic_store_n(&full_after_short, 1, __ATOMIC_SEQ_CST);
        return 2;
    }
    errno = (fault_kind && strcmp(fault_kind, "eio") == 0) ? EIO : ENOSPC;
    return 1;
}

static int decide_fd(const char *name, int fd) {
    if (!fault_dir) return 0;
    char path[4096];
    if (!fd_path(fd, path, sizeof path)) return 0;
    return decide(name, path);
}

static int decide_at(const char *name, int dirfd, const char *p) {
    if (!fault_dir || !p) return 0;
    char path[4096];
    if (p[0] == '/') {
        snprintf(path, sizeof path, "%s", p);
    } else {
        char base[4096];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else if (!fd_path(dirfd, base, sizeof base)) {
            return 0;
        }
        snprintf(path, sizeof path, "%s/%s", base, p);
    }
    return decide(name, path);
}

/* running in a signal handler on an alternate stack: no room for a decision */
static int on_signal_stack(void) {
    stack_t ss;
    return sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

#define REAL(ret, name, ...) \
    static ret (*real)(__VA_ARGS__); \
    if (!real) real = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(ssize_t, "write", int, const void *, size_t);
    if (on_signal_stack()) return real(fd, buf, n);
    int d = decide_fd("write", fd);
    if (d == 1) return -1;
    if (d == 2 && n > 1) return real(fd, buf, n / 2);
    return real(fd, buf, n);
}

static ssize_t pwrite_common(const char *sym, int fd, const void *buf, size_t n, off_t off) {
    ssize_t (*real)(int, const void *, size_t, off_t) =
        (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, sym);
    if (on_signal_stack()) return real(fd, buf, n, off);
    int d = decide_fd("pwrite", fd);
    if (d == 1) return -1;
    if (d == 2 && n > 1) return real(fd, buf, n / 2, off);
    return real(fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return pwrite_common("pwrite", fd, buf, n, off); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { return pwrite_common("pwrite64", fd, buf, n, off); }

int fsync(int fd) {
    REAL(int, "fsync", int);
    if (on_signal_stack()) return real(fd);
    if (decide_fd("fsync", fd) == 1) return -1;
    return real(fd);
}

int fdatasync(int fd) {
    REAL(int, "fdatasync", int);
    if (on_signal_stack()) return real(fd);
    if (decide_fd("fsync", fd) == 1) return -1;
    return real(fd);
}

int ftruncate(int fd, off_t len) {
    REAL(int, "ftruncate", int, off_t);
    if (on_signal_stack()) return real(fd, len);
    if (decide_fd("ftruncate", fd) == 1) return -1;
    return real(fd, len);
}

int ftruncate64(int fd, off_t len) {
    REAL(int, "ftruncate64", int, off_t);
    if (on_signal_stack()) return real(fd, len);
    if (decide_fd("ftruncate", fd) == 1) return -1;
    return real(fd, len);
}

int rename(const char *a, const char *b) {
    REAL(int, "rename", const char *, const char *);
    if (on_signal_stack()) return real(a, b);
    if (decide_at("rename", AT_FDCWD, b) == 1) return -1;
    return real(a, b);
}

int renameat(int da, const char *a, int db, const char *b) {
    REAL(int, "renameat", int, const char *, int, const char *);
    if (on_signal_stack()) return real(da, a, db, b);
    if (decide_at("rename", db, b) == 1) return -1;
    return real(da, a, db, b);
}

static int creating(int dirfd, const char *p, int flags) {
    if (!(flags & O_CREAT) || !fault_dir) return 0;
    struct stat st;
    if (fstatat(dirfd, p, &st, 0) == 0) return 0;     /* exists: nothing to allocate */
    return decide_at("create", dirfd, p);
}

#define OPEN_BODY(sym, dirfd_expr, call) \
    mode_t mode = 0; \
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); } \
    if (!on_signal_stack() && creating(dirfd_expr, p, flags) == 1) return -1; \
    return call

int open(const char *p, int flags, ...) {
    REAL(int, "open", const char *, int, ...);
    OPEN_BODY("open", AT_FDCWD, real(p, flags, mode));
}

int open64(const char *p, int flags, ...) {
    REAL(int, "open64", const char *, int, ...);
    OPEN_BODY("open64", AT_FDCWD, real(p, flags, mode));
}

int openat(int dirfd, const char *p, int flags, ...) {
    REAL(int, "openat", int, const char *, int, ...);
    OPEN_BODY("openat", dirfd, real(dirfd, p, flags, mode));
}

int openat64(int dirfd, const char *p, int flags, ...) {
    REAL(int, "openat64", int, const char *, int, ...);
    OPEN_BODY("openat64", dirfd, real(dirfd, p, flags, mode));
}

int mkdir(const char *p, mode_t mode) {
    REAL(int, "mkdir", const char *, mode_t);
    if (on_signal_stack()) return real(p, mode);
    if (decide_at("mkdir", AT_FDCWD, p) == 1) return -1;
    return real(p, mode);
}
