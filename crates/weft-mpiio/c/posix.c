/* POSIX interposition on `weft:` names.
 *
 * Libraries built on MPI-IO also touch their files with plain POSIX calls.
 * PnetCDF 1.12.3 (checked with strace): rank 0 of `ncmpi_open` sniffs the
 * format with `open()` + `read()`; `ncmpi_create` asks `access()` and, with
 * `NC_CLOBBER`, empties an existing file with `truncate()`. It first strips
 * everything up to the first ':' of the name (so `weft:/a.nc` becomes
 * `/a.nc`, a local name); later releases strip only ROMIO's own prefixes
 * (`ufs:`, `lustre:`, ...) and pass `weft:/a.nc` itself. Both reach the
 * local file system and fail, or miss the Weft file. This file serves
 * those calls from Weft when the name
 *   - begins with `weft:`, or
 *   - equals the rest of the `weft:` name of a PnetCDF call in progress on
 *     this thread (c/pnetcdf.c opens such a window around `ncmpi_create`,
 *     `ncmpi_open` and `ncmpi_inq_file_format` of a `weft:` name), so
 *     `/a.nc` inside `ncmpi_open(..., "weft:/a.nc", ...)` means the Weft
 *     file `/a.nc`, and the local `/a.nc` is never touched:
 *
 *   open / open64 / __open_2 / __open64_2, read-only: a file descriptor on
 *     a private read-only snapshot of the file's bytes (a sealed memfd
 *     filled through the Rust core), at most WEFT_POSIX_SNAPSHOT_MAX bytes
 *     (default 64 MiB; larger: EFBIG with a message on stderr, once per
 *     process; inside a PnetCDF window, whose only reader is the format
 *     probe, the first WEFT_POSIX_SNAPSHOT_MAX bytes instead). Later
 *     writes to the Weft file are not seen through it.
 *   open with write intent (O_WRONLY, O_RDWR, O_TRUNC, or O_CREAT of a
 *     missing file): a descriptor on a private writable memfd holding the
 *     file's bytes (created / emptied first as the flags say), written
 *     back to Weft by fsync, fdatasync and close (src/posix_writable.rs:
 *     only what changed). close, fsync and fdatasync are interposed for
 *     this; while no such descriptor is open their cost is one atomic load.
 *   access: from a Weft lookup (ENOENT if missing; R_OK/W_OK/X_OK against
 *     the permission bits).
 *   truncate / truncate64: sets the Weft file's size.
 *   stat / lstat / stat64 / lstat64: from a Weft lookup (type, permission
 *     bits, owner, size, handle as inode, times; HDF5 lstat()s a name
 *     before opening it). The glibc 2.33+ symbols only, not __xstat.
 *
 * Every other name goes to the next definition (libc) found with
 * dlsym(RTLD_NEXT), resolved on first use: nothing runs at load time (the
 * library is also preloaded into mpirun, shells and Python), and the test
 * on each call is a 5-byte prefix compare plus, only while some thread is
 * inside a PnetCDF call on a `weft:` name, one string compare. No MPI
 * here: this works in any process the library is preloaded into (with
 * WEFT_CONFIG set).
 *
 * Twins on purpose (a review with `duplicates` lists them): each plain
 * call and its *64 twin (open/open64, stat/stat64, statvfs/statvfs64,
 * readdir/readdir64, ...) is written out in full. glibc exports both
 * names with different struct types, and the interposed symbol must be
 * spelled out for the linker and for a reader grepping for it; the shared
 * work is already in one helper per call (weft_posix_truncate,
 * weft_posix_statfs_extra, weft_dir_next, ...), so what repeats is the few
 * lines that fill each struct type. */
#undef _FORTIFY_SOURCE   /* fortified fcntl.h defines open() inline */
#undef _FILE_OFFSET_BITS /* keep open/truncate their own names (not *64) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* The Rust core (src/posix.rs): 0 or a positive errno. */
int weft_mpiio_posix_snapshot(const char *path, int fd, uint64_t cap, int prefix_ok, uint64_t *size);
int weft_mpiio_posix_access(const char *path, int mode);
int weft_mpiio_posix_truncate(const char *path, int64_t size);
typedef struct {
    uint32_t mode, uid, gid;
    uint64_t size, ino;
    int64_t atime_ns, mtime_ns, ctime_ns;
} weft_posix_stat_t; /* src/posix.rs PosixStat */
int weft_mpiio_posix_stat(const char *path, int follow, weft_posix_stat_t *out);
/* src/posix_writable.rs: serial read-write descriptors (-1: not one of them). */
int weft_mpiio_posix_writable_open(const char *path, int fd, int create, int exclusive, int truncate, uint32_t mode,
                                   uint64_t cap, uint64_t *size);
int weft_mpiio_posix_writable_sync(int fd, int durable);
int weft_mpiio_posix_writable_release(int fd);

#include "weft_posix.h"

#define WEFT_POSIX_PREFIX "weft:"
#define WEFT_POSIX_PREFIX_LEN 5
#define WEFT_POSIX_DEFAULT_MAX ((uint64_t)64 << 20)

/* Windows open on any thread (a cheap test before the thread-local one). */
static int weft_posix_windows;
/* This thread's innermost window: the full `weft:` name, or NULL. */
static __thread const char *weft_posix_window;

int weft_posix_window_begin(const char *path, const char **outer) {
    if (!path || strncmp(path, WEFT_POSIX_PREFIX, WEFT_POSIX_PREFIX_LEN) != 0) return 0;
    *outer = weft_posix_window;
    weft_posix_window = path;
    __atomic_add_fetch(&weft_posix_windows, 1, __ATOMIC_RELEASE);
    return 1;
}

void weft_posix_window_end(int opened, const char *outer) {
    if (!opened) return;
    weft_posix_window = outer;
    __atomic_sub_fetch(&weft_posix_windows, 1, __ATOMIC_RELEASE);
}

/* Whether the Weft file `name` is the one of this thread's window. */
static int weft_posix_in_window(const char *name) {
    if (__atomic_load_n(&weft_posix_windows, __ATOMIC_ACQUIRE) == 0) return 0;
    const char *window = weft_posix_window;
    return window && strcmp(name, window + WEFT_POSIX_PREFIX_LEN) == 0;
}

/* The Weft name `path` stands for, or NULL for a name that is not ours. */
static inline const char *weft_posix_name(const char *path) {
    if (!path) return NULL;
    if (path[0] == 'w' && strncmp(path, WEFT_POSIX_PREFIX, WEFT_POSIX_PREFIX_LEN) == 0)
        return path + WEFT_POSIX_PREFIX_LEN;
    return weft_posix_in_window(path) ? path : NULL; /* the stripped name is the Weft name */
}

/* The next definition of `name`, looked up once (a race only looks it up twice). */
static void *weft_posix_next(void **slot, const char *name) {
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

typedef int (*weft_open_fn)(const char *, int, ...);
typedef int (*weft_open2_fn)(const char *, int);
typedef int (*weft_access_fn)(const char *, int);
typedef int (*weft_truncate_fn)(const char *, off_t);
typedef int (*weft_truncate64_fn)(const char *, off64_t);
typedef int (*weft_fd_fn)(int);
typedef int (*weft_stat_fn)(const char *, struct stat *);
typedef int (*weft_stat64_fn)(const char *, struct stat64 *);

/* Declares `real`, the next definition of `name` (a typedef'd pointer type). */
#define NEXT(type, name)                                   \
    static void *slot_##name;                              \
    type real = (type)weft_posix_next(&slot_##name, #name); \
    if (!real) {                                           \
        errno = ENOSYS;                                    \
        return -1;                                         \
    }

static uint64_t weft_posix_snapshot_max(void) {
    const char *text = getenv("WEFT_POSIX_SNAPSHOT_MAX");
    if (text && *text) {
        char *end;
        unsigned long long value = strtoull(text, &end, 10);
        if (*end == '\0') return value;
    }
    return WEFT_POSIX_DEFAULT_MAX;
}

/* A snapshot larger than the limit: say so once per process. */
static void weft_posix_too_big(const char *path, uint64_t size, uint64_t cap) {
    static int said;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL)) return;
    fprintf(stderr,
            "libweft_mpiio: open(\"%s\") read-only through POSIX: the file has %llu bytes, more than the "
            "%llu-byte snapshot limit (WEFT_POSIX_SNAPSHOT_MAX) -> EFBIG; read weft: files through MPI-IO "
            "or the FUSE mount\n",
            path, (unsigned long long)size, (unsigned long long)cap);
}

/* Descriptors open for writing (src/posix_writable.rs), for the fast path
 * of close, fsync and fdatasync. */
static int weft_posix_writables;

/* A descriptor on a writable copy of the Weft file `name`; -1 with errno. */
static int weft_posix_open_writable(const char *path, const char *name, int flags, mode_t mode) {
    int fd = memfd_create("weft-writable", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
    if (fd < 0) return -1;
    uint64_t cap = weft_posix_snapshot_max(), size = 0;
    int err = weft_mpiio_posix_writable_open(name, fd, (flags & O_CREAT) != 0, (flags & O_CREAT) && (flags & O_EXCL),
                                             (flags & O_TRUNC) != 0, (uint32_t)mode, cap, &size);
    if (err == EFBIG) weft_posix_too_big(path, size, cap);
    if (err == 0 && lseek(fd, 0, SEEK_SET) != 0) err = errno ? errno : EIO;
    if (err == 0 && (flags & O_APPEND) && fcntl(fd, F_SETFL, O_APPEND) != 0) err = errno ? errno : EIO;
    if (err != 0) {
        (void)weft_mpiio_posix_writable_release(fd); /* forget it if it was tracked */
        close(fd);
        errno = err;
        return -1;
    }
    __atomic_add_fetch(&weft_posix_writables, 1, __ATOMIC_RELEASE);
    return fd;
}

/* The descriptor for open(path, flags, mode) of the Weft file `name`; -1 with errno. */
static int weft_posix_open(const char *path, const char *name, int flags, mode_t mode) {
    int accmode = flags & O_ACCMODE;
    if (accmode != O_RDONLY || (flags & O_TRUNC)) return weft_posix_open_writable(path, name, flags, mode);
    int fd = memfd_create("weft-snapshot", MFD_ALLOW_SEALING | ((flags & O_CLOEXEC) ? MFD_CLOEXEC : 0));
    if (fd < 0) return -1;
    uint64_t cap = weft_posix_snapshot_max(), size = 0;
    /* Inside a PnetCDF call the only reader is its format probe (a
     * signature in the first bytes): beyond the limit it gets a prefix. */
    int prefix_ok = weft_posix_in_window(name);
    int err = weft_mpiio_posix_snapshot(name, fd, cap, prefix_ok, &size);
    if (err == 0 && (flags & O_CREAT) && (flags & O_EXCL)) err = EEXIST;
    if (err == EFBIG) weft_posix_too_big(path, size, cap);
    if (err == 0 && lseek(fd, 0, SEEK_SET) != 0) err = errno ? errno : EIO;
    /* Read-only from here on: no write, resize or further seals. */
    if (err == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
        err = errno ? errno : EIO;
    if (err != 0) {
        close(fd);
        /* O_RDONLY|O_CREAT of a missing name creates it (empty). */
        if (err == ENOENT && (flags & O_CREAT)) return weft_posix_open_writable(path, name, flags, mode);
        errno = err;
        return -1;
    }
    return fd;
}

static int weft_posix_open_mode_needed(int flags) {
#ifdef O_TMPFILE
    if ((flags & O_TMPFILE) == O_TMPFILE) return 1;
#endif
    return (flags & O_CREAT) != 0;
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (weft_posix_open_mode_needed(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_open(path, name, flags, mode);
    NEXT(weft_open_fn, open);
    return real(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (weft_posix_open_mode_needed(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_open(path, name, flags, mode);
    NEXT(weft_open_fn, open64);
    return real(path, flags, mode);
}

/* _FORTIFY_SOURCE's checked variants (open without a mode argument). */
int __open_2(const char *path, int flags) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_open(path, name, flags, 0);
    NEXT(weft_open2_fn, __open_2);
    return real(path, flags);
}

int __open64_2(const char *path, int flags) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_open(path, name, flags, 0);
    NEXT(weft_open2_fn, __open64_2);
    return real(path, flags);
}

int access(const char *path, int mode) {
    const char *name = weft_posix_name(path);
    if (name) {
        int err = weft_mpiio_posix_access(name, mode);
        if (err) {
            errno = err;
            return -1;
        }
        return 0;
    }
    NEXT(weft_access_fn, access);
    return real(path, mode);
}

static int weft_posix_truncate(const char *name, int64_t length) {
    int err = weft_mpiio_posix_truncate(name, length);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int truncate(const char *path, off_t length) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_truncate(name, (int64_t)length);
    NEXT(weft_truncate_fn, truncate);
    return real(path, length);
}

int truncate64(const char *path, off64_t length) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_truncate(name, (int64_t)length);
    NEXT(weft_truncate64_fn, truncate64);
    return real(path, length);
}

/* A write-back's result as a libc call's: 0, or -1 with errno. */
static int weft_posix_result(int err) {
    if (err == 0) return 0;
    errno = err;
    return -1;
}

int close(int fd) {
    if (__atomic_load_n(&weft_posix_writables, __ATOMIC_ACQUIRE) > 0) {
        int err = weft_mpiio_posix_writable_release(fd);
        if (err >= 0) {
            __atomic_sub_fetch(&weft_posix_writables, 1, __ATOMIC_RELEASE);
            NEXT(weft_fd_fn, close);
            int rc = real(fd);
            return err ? weft_posix_result(err) : rc; /* a failed write-back is close's error */
        }
    }
    NEXT(weft_fd_fn, close);
    return real(fd);
}

static int weft_posix_fsync(int fd, void **slot, const char *name) {
    if (__atomic_load_n(&weft_posix_writables, __ATOMIC_ACQUIRE) > 0) {
        int err = weft_mpiio_posix_writable_sync(fd, 1);
        if (err >= 0) return weft_posix_result(err);
    }
    weft_fd_fn real = (weft_fd_fn)weft_posix_next(slot, name);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd);
}

int fsync(int fd) {
    static void *slot;
    return weft_posix_fsync(fd, &slot, "fsync");
}

int fdatasync(int fd) {
    static void *slot;
    return weft_posix_fsync(fd, &slot, "fdatasync");
}

/* Fills `st` (struct stat or struct stat64: the same layout on 64-bit
 * Linux) from the Weft object `name`; 0, or -1 with errno. */
#define WEFT_FILL_STAT(st, name, follow)                                           \
    do {                                                                           \
        weft_posix_stat_t ws;                                                      \
        int err_ = weft_mpiio_posix_stat((name), (follow), &ws);                   \
        if (err_) {                                                                \
            errno = err_;                                                          \
            return -1;                                                             \
        }                                                                          \
        memset((st), 0, sizeof *(st));                                             \
        (st)->st_mode = ws.mode;                                                   \
        (st)->st_uid = ws.uid;                                                     \
        (st)->st_gid = ws.gid;                                                     \
        (st)->st_size = (off_t)ws.size;                                            \
        (st)->st_ino = ws.ino;                                                     \
        (st)->st_nlink = 1;                                                        \
        (st)->st_blksize = 65536;                                                  \
        (st)->st_blocks = (blkcnt_t)((ws.size + 511) / 512);                       \
        (st)->st_atim.tv_sec = ws.atime_ns / 1000000000;                           \
        (st)->st_atim.tv_nsec = ws.atime_ns % 1000000000;                          \
        (st)->st_mtim.tv_sec = ws.mtime_ns / 1000000000;                           \
        (st)->st_mtim.tv_nsec = ws.mtime_ns % 1000000000;                          \
        (st)->st_ctim.tv_sec = ws.ctime_ns / 1000000000;                           \
        (st)->st_ctim.tv_nsec = ws.ctime_ns % 1000000000;                          \
        return 0;                                                                  \
    } while (0)

int stat(const char *path, struct stat *st) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STAT(st, name, 1);
    NEXT(weft_stat_fn, stat);
    return real(path, st);
}

int lstat(const char *path, struct stat *st) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STAT(st, name, 0);
    NEXT(weft_stat_fn, lstat);
    return real(path, st);
}

int stat64(const char *path, struct stat64 *st) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STAT(st, name, 1);
    NEXT(weft_stat64_fn, stat64);
    return real(path, st);
}

int lstat64(const char *path, struct stat64 *st) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STAT(st, name, 0);
    NEXT(weft_stat64_fn, lstat64);
    return real(path, st);
}

/* ---------- names: unlink, remove, rename, mkdir, statvfs/statfs ---------- */

int weft_mpiio_posix_unlink(const char *path);
int weft_mpiio_posix_rename(const char *from, const char *to);
int weft_mpiio_posix_mkdir(const char *path, uint32_t mode);
int weft_mpiio_posix_rmdir(const char *path);
typedef struct {
    uint64_t bytes_total, bytes_free, objects;
} weft_posix_statfs_t; /* src/posix.rs PosixStatfs */
int weft_mpiio_posix_statfs(const char *path, weft_posix_statfs_t *out);
int weft_mpiio_posix_readdir(const char *path, unsigned char *buf, size_t cap, size_t *used);

typedef int (*weft_path_fn)(const char *);
typedef int (*weft_rename_fn)(const char *, const char *);
typedef int (*weft_mkdir_fn)(const char *, mode_t);

int unlink(const char *path) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_result(weft_mpiio_posix_unlink(name));
    NEXT(weft_path_fn, unlink);
    return real(path);
}

/* remove(3): glibc's calls its own unlink/rmdir internally, so it is
 * interposed itself: a file is unlinked, a directory removed. */
int remove(const char *path) {
    const char *name = weft_posix_name(path);
    if (name) {
        weft_posix_stat_t ws;
        int err = weft_mpiio_posix_stat(name, 0, &ws);
        if (err) return weft_posix_result(err);
        if ((ws.mode & S_IFMT) == S_IFDIR) return weft_posix_result(weft_mpiio_posix_rmdir(name));
        return weft_posix_result(weft_mpiio_posix_unlink(name));
    }
    NEXT(weft_path_fn, remove);
    return real(path);
}

/* rename(2): both Weft names -> a Weft rename; one Weft name and one local
 * name -> EXDEV (as between two file systems: callers such as mv copy). */
int rename(const char *from, const char *to) {
    const char *a = weft_posix_name(from), *b = weft_posix_name(to);
    if (a && b) return weft_posix_result(weft_mpiio_posix_rename(a, b));
    if (a || b) return weft_posix_result(EXDEV);
    NEXT(weft_rename_fn, rename);
    return real(from, to);
}

/* mkdir(2): the mode as given (no umask, as the other Weft creations here). */
int mkdir(const char *path, mode_t mode) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_result(weft_mpiio_posix_mkdir(name, (uint32_t)mode));
    NEXT(weft_mkdir_fn, mkdir);
    return real(path, mode);
}

#include <sys/statfs.h>
#include <sys/statvfs.h>

#define WEFT_POSIX_BLOCK 4096
#define WEFT_POSIX_FS_MAGIC 0x77656674 /* "weft" */

/* statvfs(3) and statfs(2) on a Weft name (IOR asks it of its test file):
 * the whole file system's space in 4 KiB blocks, each storage device once
 * (as `weft statfs`); files = objects stored + free blocks. */
#define WEFT_FILL_STATVFS(sv, name, is_statfs)                                              \
    do {                                                                                    \
        weft_posix_statfs_t fs_;                                                            \
        int err_ = weft_mpiio_posix_statfs((name), &fs_);                                   \
        if (err_) return weft_posix_result(err_);                                           \
        memset((sv), 0, sizeof *(sv));                                                      \
        (sv)->f_bsize = WEFT_POSIX_BLOCK;                                                   \
        (sv)->f_frsize = WEFT_POSIX_BLOCK;                                                  \
        (sv)->f_blocks = fs_.bytes_total / WEFT_POSIX_BLOCK;                                \
        (sv)->f_bfree = fs_.bytes_free / WEFT_POSIX_BLOCK;                                  \
        (sv)->f_bavail = fs_.bytes_free / WEFT_POSIX_BLOCK;                                 \
        (sv)->f_files = fs_.objects + fs_.bytes_free / WEFT_POSIX_BLOCK;                    \
        (sv)->f_ffree = fs_.bytes_free / WEFT_POSIX_BLOCK;                                  \
        if (is_statfs) weft_posix_statfs_extra((void *)(sv), sizeof *(sv));                 \
        else weft_posix_statvfs_extra((void *)(sv), sizeof *(sv));                          \
        return 0;                                                                           \
    } while (0)

/* struct statfs / statfs64 (same layout on 64-bit Linux): type and name length. */
static void weft_posix_statfs_extra(void *p, size_t size) {
    struct statfs *sf = p;
    (void)size;
    sf->f_type = WEFT_POSIX_FS_MAGIC;
    sf->f_namelen = 255;
}

/* struct statvfs / statvfs64: name length. */
static void weft_posix_statvfs_extra(void *p, size_t size) {
    struct statvfs *sv = p;
    (void)size;
    sv->f_namemax = 255;
}

typedef int (*weft_statvfs_fn)(const char *, struct statvfs *);
typedef int (*weft_statvfs64_fn)(const char *, struct statvfs64 *);
typedef int (*weft_statfs_fn)(const char *, struct statfs *);
typedef int (*weft_statfs64_fn)(const char *, struct statfs64 *);

int statvfs(const char *path, struct statvfs *sv) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STATVFS(sv, name, 0);
    NEXT(weft_statvfs_fn, statvfs);
    return real(path, sv);
}

int statvfs64(const char *path, struct statvfs64 *sv) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STATVFS(sv, name, 0);
    NEXT(weft_statvfs64_fn, statvfs64);
    return real(path, sv);
}

int statfs(const char *path, struct statfs *sf) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STATVFS(sf, name, 1);
    NEXT(weft_statfs_fn, statfs);
    return real(path, sf);
}

int statfs64(const char *path, struct statfs64 *sf) {
    const char *name = weft_posix_name(path);
    if (name) WEFT_FILL_STATVFS(sf, name, 1);
    NEXT(weft_statfs64_fn, statfs64);
    return real(path, sf);
}

/* ---------- fopen for reading ---------- */

typedef FILE *(*weft_fopen_fn)(const char *, const char *);

/* fopen(3) on a Weft name: read-only modes ("r", "rb", "re", ...) get a
 * stream on the read-only snapshot open() gives; modes that write are
 * refused with EROFS: glibc's fclose closes the descriptor internally,
 * so nothing would write the bytes back (write weft: files through open(),
 * MPI-IO or the mount). */
static FILE *weft_posix_fopen(const char *path, const char *name, const char *mode) {
    if (!mode || mode[0] != 'r' || strchr(mode, '+')) {
        errno = mode ? EROFS : EINVAL;
        return NULL;
    }
    int fd = weft_posix_open(path, name, O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0), 0);
    if (fd < 0) return NULL;
    FILE *stream = fdopen(fd, mode);
    if (!stream) {
        int err = errno;
        close(fd); /* a snapshot: nothing to write back */
        errno = err;
    }
    return stream;
}

FILE *fopen(const char *path, const char *mode) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_fopen(path, name, mode);
    static void *slot;
    weft_fopen_fn real = (weft_fopen_fn)weft_posix_next(&slot, "fopen");
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    return real(path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
    const char *name = weft_posix_name(path);
    if (name) return weft_posix_fopen(path, name, mode);
    static void *slot;
    weft_fopen_fn real = (weft_fopen_fn)weft_posix_next(&slot, "fopen64");
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    return real(path, mode);
}

/* ---------- opendir / readdir of a Weft directory ---------- */

#include <dirent.h>
#include <pthread.h>

/* A Weft directory stream: its entries listed at opendir (a snapshot, as
 * the read-only open), handed out by readdir/readdir64. The DIR * given
 * out points at one of these; readdir, readdir64, closedir, rewinddir and
 * dirfd recognise it by address in a list (one atomic load while no Weft
 * stream is open), foreign streams go to libc untouched. */
typedef struct weft_dir {
    unsigned char *entries; /* src/posix.rs weft_mpiio_posix_readdir's packing */
    size_t len, pos;
    int dot;                /* "." and ".." handed out (0, 1, 2) */
    uint64_t ino;           /* the directory's */
    struct dirent ent;
    struct dirent64 ent64;
    struct weft_dir *next;
} weft_dir;

static weft_dir *weft_dirs;
static int weft_dirs_open;
static pthread_mutex_t weft_dirs_lock = PTHREAD_MUTEX_INITIALIZER;

static weft_dir *weft_dir_find(void *stream, int unlink_it) {
    if (__atomic_load_n(&weft_dirs_open, __ATOMIC_ACQUIRE) == 0) return NULL;
    pthread_mutex_lock(&weft_dirs_lock);
    weft_dir **at = &weft_dirs;
    while (*at && (void *)*at != stream) at = &(*at)->next;
    weft_dir *found = *at;
    if (found && unlink_it) {
        *at = found->next;
        __atomic_sub_fetch(&weft_dirs_open, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&weft_dirs_lock);
    return found;
}

typedef DIR *(*weft_opendir_fn)(const char *);

DIR *opendir(const char *path) {
    const char *name = weft_posix_name(path);
    if (!name) {
        static void *slot;
        weft_opendir_fn real = (weft_opendir_fn)weft_posix_next(&slot, "opendir");
        if (!real) {
            errno = ENOSYS;
            return NULL;
        }
        return real(path);
    }
    weft_posix_stat_t ws;
    int err = weft_mpiio_posix_stat(name, 1, &ws);
    if (!err && (ws.mode & S_IFMT) != S_IFDIR) err = ENOTDIR;
    weft_dir *dir = err ? NULL : calloc(1, sizeof *dir);
    if (!err && !dir) err = ENOMEM;
    /* The listing may grow between two calls: bounded retries. */
    size_t cap = 0;
    for (int attempt = 0; !err; attempt++) {
        size_t need = 0;
        err = weft_mpiio_posix_readdir(name, dir->entries, cap, &need);
        if (err != ERANGE) {
            dir->len = need;
            break;
        }
        if (attempt == 7) {
            err = EAGAIN;
            break;
        }
        free(dir->entries);
        cap = need + 4096;
        dir->entries = malloc(cap);
        err = dir->entries ? 0 : ENOMEM;
    }
    if (err) {
        if (dir) free(dir->entries);
        free(dir);
        errno = err;
        return NULL;
    }
    dir->ino = ws.ino;
    pthread_mutex_lock(&weft_dirs_lock);
    dir->next = weft_dirs;
    weft_dirs = dir;
    __atomic_add_fetch(&weft_dirs_open, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&weft_dirs_lock);
    return (DIR *)dir;
}

/* The next entry of a Weft stream into its name/type/inode; 0 at the end. */
static int weft_dir_next(weft_dir *dir, const char **name, unsigned char *type, uint64_t *ino) {
    if (dir->dot < 2) {
        *name = dir->dot == 0 ? "." : "..";
        *type = DT_DIR;
        *ino = dir->ino;
        dir->dot++;
        return 1;
    }
    if (dir->pos >= dir->len) return 0;
    unsigned char *at = dir->entries + dir->pos;
    *type = at[0];
    memcpy(ino, at + 1, 8);
    *name = (const char *)(at + 9);
    dir->pos += 9 + strlen(*name) + 1;
    return 1;
}

typedef struct dirent *(*weft_readdir_fn)(DIR *);
typedef struct dirent64 *(*weft_readdir64_fn)(DIR *);

struct dirent *readdir(DIR *stream) {
    weft_dir *dir = weft_dir_find(stream, 0);
    if (!dir) {
        static void *slot;
        weft_readdir_fn real = (weft_readdir_fn)weft_posix_next(&slot, "readdir");
        return real ? real(stream) : NULL;
    }
    const char *name;
    unsigned char type;
    uint64_t ino;
    if (!weft_dir_next(dir, &name, &type, &ino)) return NULL;
    memset(&dir->ent, 0, sizeof dir->ent);
    dir->ent.d_ino = ino;
    dir->ent.d_type = type;
    dir->ent.d_reclen = sizeof dir->ent;
    snprintf(dir->ent.d_name, sizeof dir->ent.d_name, "%s", name);
    return &dir->ent;
}

struct dirent64 *readdir64(DIR *stream) {
    weft_dir *dir = weft_dir_find(stream, 0);
    if (!dir) {
        static void *slot;
        weft_readdir64_fn real = (weft_readdir64_fn)weft_posix_next(&slot, "readdir64");
        return real ? real(stream) : NULL;
    }
    const char *name;
    unsigned char type;
    uint64_t ino;
    if (!weft_dir_next(dir, &name, &type, &ino)) return NULL;
    memset(&dir->ent64, 0, sizeof dir->ent64);
    dir->ent64.d_ino = ino;
    dir->ent64.d_type = type;
    dir->ent64.d_reclen = sizeof dir->ent64;
    snprintf(dir->ent64.d_name, sizeof dir->ent64.d_name, "%s", name);
    return &dir->ent64;
}

typedef int (*weft_closedir_fn)(DIR *);
typedef void (*weft_rewinddir_fn)(DIR *);
typedef int (*weft_dirfd_fn)(DIR *);

int closedir(DIR *stream) {
    weft_dir *dir = weft_dir_find(stream, 1);
    if (!dir) {
        NEXT(weft_closedir_fn, closedir);
        return real(stream);
    }
    free(dir->entries);
    free(dir);
    return 0;
}

/* rewinddir: back to the first entry of the listing taken at opendir. */
void rewinddir(DIR *stream) {
    weft_dir *dir = weft_dir_find(stream, 0);
    if (dir) {
        dir->pos = 0;
        dir->dot = 0;
        return;
    }
    static void *slot;
    weft_rewinddir_fn real = (weft_rewinddir_fn)weft_posix_next(&slot, "rewinddir");
    if (real) real(stream);
}

/* dirfd: a Weft stream has no descriptor (ENOTSUP). */
int dirfd(DIR *stream) {
    if (weft_dir_find(stream, 0)) return weft_posix_result(ENOTSUP);
    NEXT(weft_dirfd_fn, dirfd);
    return real(stream);
}
