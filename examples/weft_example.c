/*
 * weft_example.c - walks through the libweft C API and checks every result.
 *
 * Usage: weft_example [CONFIG [BASE_DIR]]
 *   CONFIG    Weft configuration file (default: $WEFT_CONFIG)
 *   BASE_DIR  directory to create and work in (default: /weft-example)
 *
 * Prints one line per step ("ok: ..." or "FAIL: ...") and exits 0 only if
 * every check passed. It leaves BASE_DIR/keep.bin behind on purpose, so a
 * test can check its bytes with another client: KEEP_BYTES bytes,
 * byte i = pattern_byte(i, KEEP_SEED).
 *
 * Build (from the workspace root, after cargo build --release -p weft-capi):
 *   gcc -O2 -Wall -Werror -I include examples/weft_example.c \
 *       -L target/release -lweft -Wl,-rpath,$PWD/target/release \
 *       -o target/release/weft_example
 * or: make -C examples
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "weft.h"

/* Layout of the main test file: small strips so the write spans many. */
#define STRIP_BYTES 4096
#define STRIPE_COUNT 3
/* An unaligned offset and a length of several strips plus a remainder. */
#define WRITE_OFFSET 1000
#define WRITE_BYTES (5 * STRIP_BYTES + 1234)
/* The file left behind for the test to verify. */
#define KEEP_BYTES 10000
#define KEEP_SEED 2

static int failures = 0;

/* The byte at position i of a pattern; the Rust test computes the same. */
static unsigned char pattern_byte(uint64_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + (i >> 8) + seed * 7u) & 0xffu);
}

static void fill_pattern(unsigned char *buffer, size_t length, unsigned seed)
{
    for (size_t i = 0; i < length; i++)
        buffer[i] = pattern_byte(i, seed);
}

/* Checks that a call returned `want`; prints one line either way. */
static int expect(long got, long want, const char *what)
{
    if (got == want) {
        printf("ok: %s\n", what);
        return 1;
    }
    printf("FAIL: %s: got %ld (%s), want %ld (%s)\n", what, got,
           got < 0 ? weft_strerror((int)got) : "-", want,
           want < 0 ? weft_strerror((int)want) : "-");
    failures++;
    return 0;
}

/* Checks a condition; prints one line either way. */
static int check(int condition, const char *what)
{
    if (condition) {
        printf("ok: %s\n", what);
        return 1;
    }
    printf("FAIL: %s\n", what);
    failures++;
    return 0;
}

/* out = dir/name; a path that does not fit is a usage error. */
static void join(char *out, size_t size, const char *dir, const char *name)
{
    int length = snprintf(out, size, "%s/%s", dir, name);

    if (length < 0 || (size_t)length >= size) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(2);
    }
}

/* Counts the entries of a directory and whether `wanted` is among them. */
static int list_dir(weft_fs_t *fs, const char *path, const char *wanted,
                    int *found)
{
    weft_dir_t *dir = NULL;
    struct weft_dirent entry;
    int count = 0, rc;

    *found = 0;
    rc = weft_opendir(fs, path, &dir);
    if (rc < 0)
        return rc;
    while ((rc = weft_readdir(dir, &entry)) == 1) {
        printf("  entry: %s (type %u, handle %" PRIu64 ")\n", entry.name,
               entry.type, entry.handle);
        if (strcmp(entry.name, wanted) == 0)
            *found = 1;
        count++;
    }
    weft_closedir(dir);
    return rc < 0 ? rc : count;
}

static void step_statfs(weft_fs_t *fs)
{
    struct weft_statfs space;
    struct weft_server_statfs servers[64];
    ssize_t n;

    if (!expect(weft_statfs(fs, &space), 0, "statfs"))
        return;
    printf("  servers %u, bytes total %" PRIu64 ", free %" PRIu64 "\n",
           space.server_count, space.bytes_total, space.bytes_free);
    check(space.server_count > 0 && space.bytes_free <= space.bytes_total,
          "statfs values are sane");
    n = weft_statfs_servers(fs, servers, 64);
    expect((long)n, (long)space.server_count, "statfs_servers count");
}

static void step_errors(weft_fs_t *fs, const char *work, const char *base)
{
    char path[512];
    weft_file_t *file = NULL;

    join(path, sizeof path, work, "missing.bin");
    expect(weft_open(fs, path, O_RDONLY, 0, &file), -ENOENT,
           "open of a missing file gives -ENOENT");
    check(file == NULL, "failed open leaves *out NULL");
    expect(weft_mkdir(fs, work, 0755), -EEXIST,
           "mkdir of an existing directory gives -EEXIST");
    expect(weft_rmdir(fs, work), -ENOTEMPTY,
           "rmdir of a non-empty directory gives -ENOTEMPTY");
    expect(weft_opendir(fs, path, NULL), -EINVAL,
           "NULL output pointer gives -EINVAL");
    expect(weft_unlink(fs, base), -EISDIR,
           "unlink of a directory gives -EISDIR");
}

/* Writes the pattern at an unaligned offset over several strips and
 * reads it back, whole and in an unaligned middle piece. */
static void step_io(weft_file_t *file)
{
    unsigned char *pattern = malloc(WRITE_BYTES);
    unsigned char *back = malloc(WRITE_OFFSET + WRITE_BYTES + 100);
    ssize_t n;
    int same = 1;

    fill_pattern(pattern, WRITE_BYTES, 1);
    n = weft_pwrite(file, pattern, WRITE_BYTES, WRITE_OFFSET);
    expect((long)n, WRITE_BYTES, "pwrite of 5 strips + 1234 bytes at offset 1000");
    expect(weft_fsync(file), 0, "fsync");

    n = weft_pread(file, back, WRITE_OFFSET + WRITE_BYTES + 100, 0);
    expect((long)n, WRITE_OFFSET + WRITE_BYTES, "pread stops at end of file");
    for (size_t i = 0; i < WRITE_OFFSET; i++)
        same &= back[i] == 0;
    check(same, "hole before the write reads as zeros");
    check(memcmp(back + WRITE_OFFSET, pattern, WRITE_BYTES) == 0,
          "read-back matches byte for byte");

    n = weft_pread(file, back, 5000, WRITE_OFFSET + 2001);
    expect((long)n, 5000, "unaligned pread across strips");
    check(memcmp(back, pattern + 2001, 5000) == 0,
          "unaligned read matches byte for byte");
    expect((long)weft_pread(file, back, 10, -1), -EINVAL,
           "negative offset gives -EINVAL");
    free(pattern);
    free(back);
}

static void step_stat(weft_fs_t *fs, const char *path, weft_file_t *file)
{
    struct weft_stat by_path, by_file;

    if (!expect(weft_stat(fs, path, &by_path), 0, "stat"))
        return;
    expect((long)by_path.size, WRITE_OFFSET + WRITE_BYTES, "stat size");
    check(S_ISREG(by_path.mode), "stat says regular file");
    expect((long)(by_path.mode & 07777), 0640, "stat permission bits");
    expect(weft_fstat(file, &by_file), 0, "fstat");
    check(by_file.handle == by_path.handle, "fstat and stat agree on handle");
    expect((long)by_file.strip_bytes, STRIP_BYTES, "strip size as created");
    check(by_file.stripe_count >= 1 && by_file.stripe_count <= STRIPE_COUNT,
          "stripe count as created (at most the data servers)");
}

static void step_symlink(weft_fs_t *fs, const char *work, const char *target)
{
    char link[512], buffer[512];
    struct weft_stat info;

    join(link, sizeof link, work, "link");
    expect(weft_symlink(fs, target, link), 0, "symlink");
    expect((long)weft_readlink(fs, link, buffer, sizeof buffer),
           (long)strlen(target) - (strncmp(target, "weft:", 5) == 0 ? 5 : 0),
           "readlink length");
    /* The library stores the target without a "weft:" prefix. */
    if (strncmp(target, "weft:", 5) == 0)
        target += 5;
    check(strcmp(buffer, target) == 0, "readlink target");
    expect(weft_lstat(fs, link, &info), 0, "lstat of the link");
    check(S_ISLNK(info.mode), "lstat says symlink");
    expect(weft_stat(fs, link, &info), 0, "stat through the link");
    expect((long)info.size, WRITE_OFFSET + WRITE_BYTES, "stat follows the link");
    expect(weft_unlink(fs, link), 0, "unlink of the link");
}

static void step_rename_truncate(weft_fs_t *fs, const char *from,
                                 const char *to, weft_file_t *file)
{
    struct weft_stat info;
    unsigned char tail[100];

    expect(weft_rename(fs, from, to), 0, "rename");
    expect(weft_stat(fs, from, &info), -ENOENT, "old name is gone");
    expect(weft_truncate(fs, to, 5000), 0, "truncate by path");
    expect(weft_stat(fs, to, &info), 0, "stat after truncate");
    expect((long)info.size, 5000, "size after truncate by path");
    expect(weft_ftruncate(file, 3000), 0, "ftruncate of the open file");
    expect(weft_fstat(file, &info), 0, "fstat after ftruncate");
    expect((long)info.size, 3000, "size after ftruncate");
    expect((long)weft_pread(file, tail, sizeof tail, 2990), 10,
           "short read at the new end");
}

static void step_access(weft_fs_t *fs, const char *path)
{
    weft_file_t *reader = NULL;
    char byte = 'x';

    if (!expect(weft_open(fs, path, O_RDONLY, 0, &reader), 0, "open read-only"))
        return;
    expect((long)weft_pwrite(reader, &byte, 1, 0), -EBADF,
           "pwrite on a read-only file gives -EBADF");
    expect(weft_close(reader), 0, "close");
    expect(weft_close(reader), -EBADF, "second close gives -EBADF");
}

/* Writes the file the test verifies with the Rust client. */
static void step_keep(weft_fs_t *fs, const char *base)
{
    char path[512];
    unsigned char *data = malloc(KEEP_BYTES);
    weft_file_t *file = NULL;

    join(path, sizeof path, base, "keep.bin");
    fill_pattern(data, KEEP_BYTES, KEEP_SEED);
    if (expect(weft_create(fs, path, O_WRONLY | O_EXCL, 0644, 1000, 2, &file),
               0, "create keep.bin (strip 1000, 2 datafiles)")) {
        expect((long)weft_pwrite(file, data, KEEP_BYTES, 0), KEEP_BYTES,
               "pwrite keep.bin");
        expect(weft_fsync(file), 0, "fsync keep.bin");
        expect(weft_close(file), 0, "close keep.bin");
    }
    free(data);
}

static void run(weft_fs_t *fs, const char *base)
{
    char work[512], data[512], renamed[512];
    weft_file_t *file = NULL;
    int found = 0;

    join(work, sizeof work, base, "work");
    join(data, sizeof data, work, "data.bin");
    join(renamed, sizeof renamed, work, "renamed.bin");

    step_statfs(fs);
    if (!expect(weft_mkdir(fs, base, 0755), 0, "mkdir base") ||
        !expect(weft_mkdir(fs, work, 0755), 0, "mkdir work"))
        return;
    if (!expect(weft_create(fs, data, O_RDWR | O_EXCL, 0640, STRIP_BYTES,
                            STRIPE_COUNT, &file),
                0, "create data.bin (strip 4096, 3 datafiles)"))
        return;
    step_io(file);
    step_stat(fs, data, file);
    step_symlink(fs, work, data);
    expect(list_dir(fs, work, "data.bin", &found), 1, "readdir lists one entry");
    check(found, "readdir finds data.bin");
    step_errors(fs, work, base);
    step_rename_truncate(fs, data, renamed, file);
    expect(weft_close(file), 0, "close data file");
    step_access(fs, renamed);
    step_keep(fs, base);

    expect(weft_unlink(fs, renamed), 0, "unlink");
    expect(weft_unlink(fs, renamed), -ENOENT, "second unlink gives -ENOENT");
    expect(weft_rmdir(fs, work), 0, "rmdir work");
    expect(list_dir(fs, base, "keep.bin", &found), 1, "base lists only keep.bin");
    check(found, "keep.bin is left behind");
}

int main(int argc, char **argv)
{
    const char *config = argc > 1 ? argv[1] : NULL; /* NULL: $WEFT_CONFIG */
    const char *base = argc > 2 ? argv[2] : "/weft-example";
    weft_fs_t *fs = NULL;

    if (!expect(weft_connect(config, &fs), 0, "connect"))
        return 1;
    run(fs, base);
    expect(weft_disconnect(fs), 0, "disconnect");
    expect(weft_disconnect(fs), -EBADF, "second disconnect gives -EBADF");
    if (failures > 0) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
