/* The POSIX interposition on `weft:` names (c/posix.c), without MPI.
 *
 *   posix_probe WEFT_FILE SIZE WEFT_MISSING LOCAL_DIR WEFT_NEW
 *
 * Run with libweft_mpiio preloaded and WEFT_CONFIG set. WEFT_FILE (a
 * `weft:` name) holds SIZE bytes, byte i = (i * 7 + 3) & 0xff; WEFT_MISSING
 * does not exist; LOCAL_DIR is a writable local directory. Checks:
 * - open(O_RDONLY), open64, open(O_RDONLY | O_CLOEXEC) of WEFT_FILE read
 *   exactly its bytes (read, pread, fstat size, lseek); the descriptor
 *   cannot be written;
 * - O_CREAT|O_EXCL of an existing name fails with EEXIST, open of
 *   WEFT_MISSING with ENOENT, O_RDWR of it too (nothing created);
 * - read-write (WEFT_NEW, missing at start): O_WRONLY|O_CREAT|O_EXCL,
 *   writes of 20,000 pattern bytes, close; O_RDWR reads them back, pwrite
 *   of 100 'Z' at 5,000, fsync: a read-only open (while the first is
 *   still open) sees them; ftruncate to 15,000, close: a new open sees
 *   15,000 bytes with the 'Z's; O_RDWR|O_TRUNC empties it at once (fstat
 *   0), then O_WRONLY|O_APPEND writes "abc" twice at the end (the Rust
 *   test checks the file is "abcabc");
 * - access(F_OK / R_OK) of WEFT_FILE is 0, of WEFT_MISSING ENOENT;
 * - stat, lstat, stat64 of WEFT_FILE: a regular file of SIZE bytes with a
 *   nonzero inode; of WEFT_MISSING: ENOENT;
 * - truncate(WEFT_FILE, SIZE / 2) shrinks the Weft file (seen by a new open);
 * - with WEFT_POSIX_SNAPSHOT_MAX below the size, open fails with EFBIG
 *   (the message on stderr is printed once: the test counts it);
 * - local names are untouched: create, write, access, truncate, reopen
 *   and read a file in LOCAL_DIR.
 * Prints "posix_probe OK" when every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            failures++;                                                          \
            fprintf(stderr, "posix_probe: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
        }                                                                        \
    } while (0)

static unsigned char pattern(long i) { return (unsigned char)((i * 7 + 3) & 0xff); }

/* Reads the whole descriptor with read() and checks `size` bytes of the pattern. */
static void check_contents(int fd, long size, const char *what) {
    struct stat st;
    EXPECT(fstat(fd, &st) == 0 && st.st_size == size, "%s: fstat size %lld, want %ld", what, (long long)st.st_size, size);
    unsigned char *buf = malloc(size + 4096);
    long got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, 4096 + size - got);
        if (n <= 0) {
            EXPECT(n == 0, "%s: read: %s", what, strerror(errno));
            break;
        }
        got += n;
    }
    EXPECT(got == size, "%s: read %ld bytes, want %ld", what, got, size);
    long bad = 0;
    for (long i = 0; i < got && i < size; i++)
        if (buf[i] != pattern(i) && bad++ < 3) EXPECT(0, "%s: byte %ld is %u, want %u", what, i, buf[i], pattern(i));
    EXPECT(bad == 0, "%s: %ld wrong bytes", what, bad);
    free(buf);
}

static void expect_open_error(const char *path, int flags, int want, const char *what) {
    errno = 0;
    int fd = open(path, flags, 0644);
    EXPECT(fd < 0 && errno == want, "%s: open gave fd %d errno %d (%s), want errno %d (%s)", what, fd, errno,
           strerror(errno), want, strerror(want));
    if (fd >= 0) close(fd);
}

/* The read-write checks on the missing name `path` (see the top). */
static void read_write(const char *path) {
    enum { TOTAL = 20000, Z_AT = 5000, Z_LEN = 100, CUT = 15000 };
    static unsigned char buf[TOTAL], z[Z_LEN];
    for (long i = 0; i < TOTAL; i++) buf[i] = pattern(i);
    memset(z, 'Z', sizeof z);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);
    EXPECT(fd >= 0, "O_WRONLY|O_CREAT|O_EXCL of a new name: %s", strerror(errno));
    if (fd < 0) return;
    EXPECT(write(fd, buf, 7000) == 7000 && write(fd, buf + 7000, TOTAL - 7000) == TOTAL - 7000, "writes");
    EXPECT(close(fd) == 0, "close after writing: %s", strerror(errno));

    fd = open(path, O_RDWR);
    EXPECT(fd >= 0, "O_RDWR of the new file: %s", strerror(errno));
    if (fd < 0) return;
    check_contents(fd, TOTAL, "O_RDWR after create");
    EXPECT(pwrite(fd, z, Z_LEN, Z_AT) == Z_LEN, "pwrite");
    EXPECT(fsync(fd) == 0, "fsync: %s", strerror(errno));
    int reader = open(path, O_RDONLY);
    unsigned char got[Z_LEN + 2];
    EXPECT(reader >= 0 && pread(reader, got, sizeof got, Z_AT - 1) == (ssize_t)sizeof got && got[0] == pattern(Z_AT - 1) &&
               memcmp(got + 1, z, Z_LEN) == 0 && got[Z_LEN + 1] == pattern(Z_AT + Z_LEN),
           "a read-only open after fsync does not see the pwrite");
    if (reader >= 0) close(reader);
    EXPECT(ftruncate(fd, CUT) == 0, "ftruncate: %s", strerror(errno));
    EXPECT(close(fd) == 0, "close after ftruncate: %s", strerror(errno));

    fd = open(path, O_RDONLY);
    struct stat st;
    EXPECT(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == CUT, "size after ftruncate and close");
    if (fd >= 0) {
        static unsigned char back[CUT];
        EXPECT(read(fd, back, CUT) == CUT, "read after close");
        memcpy(buf + Z_AT, z, Z_LEN);
        EXPECT(memcmp(back, buf, CUT) == 0, "bytes after pwrite, ftruncate and close");
        close(fd);
    }

    fd = open(path, O_RDWR | O_TRUNC);
    EXPECT(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0, "O_RDWR|O_TRUNC: not empty");
    int probe = open(path, O_RDONLY);
    EXPECT(probe >= 0 && fstat(probe, &st) == 0 && st.st_size == 0, "O_TRUNC not visible at once");
    if (probe >= 0) close(probe);
    if (fd >= 0) close(fd);
    for (int round = 0; round < 2; round++) {
        fd = open(path, O_WRONLY | O_APPEND);
        EXPECT(fd >= 0 && write(fd, "abc", 3) == 3, "O_APPEND write %d", round);
        if (fd >= 0) close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: posix_probe WEFT_FILE SIZE WEFT_MISSING LOCAL_DIR WEFT_NEW\n");
        return 2;
    }
    const char *file = argv[1], *missing = argv[3], *dir = argv[4];
    long size = atol(argv[2]);

    /* Read-only opens: a snapshot of the bytes. */
    int fd = open(file, O_RDONLY);
    EXPECT(fd >= 0, "open(O_RDONLY): %s", strerror(errno));
    if (fd >= 0) {
        check_contents(fd, size, "open");
        unsigned char byte = 0;
        EXPECT(pread(fd, &byte, 1, size - 1) == 1 && byte == pattern(size - 1), "pread of the last byte");
        EXPECT(lseek(fd, 5, SEEK_SET) == 5 && read(fd, &byte, 1) == 1 && byte == pattern(5), "lseek + read");
        errno = 0;
        EXPECT(write(fd, "x", 1) < 0, "write to the snapshot succeeded");
        EXPECT(ftruncate(fd, 0) < 0, "ftruncate of the snapshot succeeded");
        close(fd);
    }
    fd = open64(file, O_RDONLY);
    EXPECT(fd >= 0, "open64(O_RDONLY): %s", strerror(errno));
    if (fd >= 0) check_contents(fd, size, "open64"), close(fd);
    fd = open(file, O_RDONLY | O_CLOEXEC);
    EXPECT(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "open(O_RDONLY | O_CLOEXEC): %s", strerror(errno));
    if (fd >= 0) close(fd);

    /* Exclusive creates and missing names. */
    expect_open_error(file, O_RDONLY | O_CREAT | O_EXCL, EEXIST, "O_CREAT|O_EXCL of an existing name");
    expect_open_error(file, O_RDWR | O_CREAT | O_EXCL, EEXIST, "O_RDWR|O_CREAT|O_EXCL of an existing name");
    expect_open_error(missing, O_RDONLY, ENOENT, "O_RDONLY of a missing name");
    expect_open_error(missing, O_RDWR, ENOENT, "O_RDWR of a missing name");

    read_write(argv[5]);

    /* access. */
    EXPECT(access(file, F_OK) == 0, "access(F_OK): %s", strerror(errno));
    EXPECT(access(file, R_OK) == 0, "access(R_OK): %s", strerror(errno));
    errno = 0;
    EXPECT(access(missing, F_OK) < 0 && errno == ENOENT, "access(missing) errno %d", errno);

    /* stat family. */
    struct stat st;
    struct stat64 st64;
    EXPECT(stat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size && st.st_ino != 0, "stat");
    EXPECT(lstat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size, "lstat");
    EXPECT(stat64(file, &st64) == 0 && S_ISREG(st64.st_mode) && st64.st_size == size, "stat64");
    errno = 0;
    EXPECT(lstat(missing, &st) < 0 && errno == ENOENT, "lstat(missing) errno %d", errno);

    /* truncate shrinks the Weft file; a new snapshot sees it. */
    long half = size / 2;
    EXPECT(truncate(file, half) == 0, "truncate: %s", strerror(errno));
    fd = open(file, O_RDONLY);
    EXPECT(fd >= 0, "open after truncate: %s", strerror(errno));
    if (fd >= 0) check_contents(fd, half, "after truncate"), close(fd);
    errno = 0;
    EXPECT(truncate(missing, 0) < 0 && errno == ENOENT, "truncate(missing) errno %d", errno);

    /* Beyond the snapshot limit: EFBIG, message once (two tries). */
    char limit[32];
    snprintf(limit, sizeof limit, "%ld", half - 1);
    setenv("WEFT_POSIX_SNAPSHOT_MAX", limit, 1);
    expect_open_error(file, O_RDONLY, EFBIG, "beyond WEFT_POSIX_SNAPSHOT_MAX");
    expect_open_error(file, O_RDONLY, EFBIG, "beyond WEFT_POSIX_SNAPSHOT_MAX, again");
    unsetenv("WEFT_POSIX_SNAPSHOT_MAX");

    /* Local names go to libc. */
    char local[4096];
    snprintf(local, sizeof local, "%s/local.bin", dir);
    fd = open(local, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT(fd >= 0, "local create: %s", strerror(errno));
    if (fd >= 0) {
        unsigned char buf[1000];
        for (int i = 0; i < 1000; i++) buf[i] = pattern(i);
        EXPECT(write(fd, buf, sizeof buf) == (ssize_t)sizeof buf, "local write");
        close(fd);
    }
    EXPECT(access(local, R_OK | W_OK) == 0, "local access: %s", strerror(errno));
    EXPECT(truncate(local, 600) == 0, "local truncate: %s", strerror(errno));
    fd = open(local, O_RDONLY);
    EXPECT(fd >= 0, "local reopen: %s", strerror(errno));
    if (fd >= 0) check_contents(fd, 600, "local"), close(fd);
    fd = open64(local, O_RDWR);
    EXPECT(fd >= 0, "local open64(O_RDWR): %s", strerror(errno));
    if (fd >= 0) close(fd);
    char local_missing[4096];
    snprintf(local_missing, sizeof local_missing, "%s/missing", dir);
    errno = 0;
    EXPECT(access(local_missing, F_OK) < 0 && errno == ENOENT, "local access(missing)");

    if (failures == 0) printf("posix_probe OK\n");
    else printf("posix_probe FAILED: %d checks\n", failures);
    return failures == 0 ? 0 : 1;
}
