/* POSIX name calls on weft: names, with libweft_mpiio preloaded (no MPI
 * call): mkdir, stat/lstat, fopen for reading, rename, opendir/readdir,
 * statvfs/statfs, unlink and remove; and the same calls on local names
 * reach the local file system.
 * usage: posix_names weft:/DIR LOCAL_DIR
 * Leaves DIR/keep (5 bytes "hello") and DIR/local-copy... nothing else in DIR. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno)); failures++; } } while (0)

static char *join(const char *dir, const char *name) {
    static char buf[8][4096];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, 4096, "%s/%s", dir, name);
    return out;
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0, "open %s", path);
    if (fd < 0) return;
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s", path);
    CHECK(close(fd) == 0, "close %s", path);
}

/* The sorted names (without . and ..) of directory `path`, joined by ','. */
static void listing(const char *path, char *out, size_t cap) {
    char names[16][256];
    int n = 0, dots = 0;
    out[0] = '\0';
    DIR *dir = opendir(path);
    CHECK(dir != NULL, "opendir %s", path);
    if (!dir) return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL && n < 16) {
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) { dots++; continue; }
        CHECK(entry->d_type == DT_REG || entry->d_type == DT_DIR, "d_type of %s", entry->d_name);
        snprintf(names[n++], 256, "%s%s", entry->d_name, entry->d_type == DT_DIR ? "/" : "");
    }
    CHECK(dots == 2, "%s: %d dot entries", path, dots);
    CHECK(closedir(dir) == 0, "closedir %s", path);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) > 0) { char t[256]; strcpy(t, names[i]); strcpy(names[i], names[j]); strcpy(names[j], t); }
    for (int i = 0; i < n; i++) {
        strncat(out, names[i], cap - strlen(out) - 1);
        if (i + 1 < n) strncat(out, ",", cap - strlen(out) - 1);
    }
}

static void names(const char *dir, int weft) {
    struct stat st;
    char text[64], list[1024];
    CHECK(mkdir(dir, 0750) == 0, "mkdir %s", dir);
    errno = 0;
    CHECK(mkdir(dir, 0750) == -1 && errno == EEXIST, "second mkdir %s: EEXIST", dir);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "stat %s: a directory", dir);
    CHECK(mkdir(join(dir, "sub"), 0755) == 0, "mkdir sub");
    write_file(join(dir, "a"), "hello");
    write_file(join(dir, "c"), "gone soon");

    CHECK(stat(join(dir, "a"), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 5, "stat a");
    CHECK(lstat(join(dir, "a"), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 5, "lstat a");

    /* fopen for reading */
    FILE *f = fopen(join(dir, "a"), "r");
    CHECK(f != NULL, "fopen a r");
    if (f) {
        memset(text, 0, sizeof text);
        CHECK(fread(text, 1, sizeof text, f) == 5 && !memcmp(text, "hello", 5), "fread a: '%s'", text);
        CHECK(fclose(f) == 0, "fclose a");
    }
    errno = 0;
    CHECK(fopen(join(dir, "missing"), "rb") == NULL && errno == ENOENT, "fopen missing: ENOENT");
    if (weft) {
        errno = 0;
        CHECK(fopen(join(dir, "a"), "w") == NULL && errno == EROFS, "fopen w on weft: EROFS");
    }

    /* rename */
    CHECK(rename(join(dir, "a"), join(dir, "keep")) == 0, "rename a keep");
    errno = 0;
    CHECK(stat(join(dir, "a"), &st) == -1 && errno == ENOENT, "stat a after rename: ENOENT");
    CHECK(stat(join(dir, "keep"), &st) == 0 && st.st_size == 5, "stat keep");
    if (weft) {
        errno = 0;
        CHECK(rename(join(dir, "keep"), "/tmp/weft-posix-names-never") == -1 && errno == EXDEV, "rename to local: EXDEV");
    }

    /* opendir / readdir */
    listing(dir, list, sizeof list);
    CHECK(!strcmp(list, "c,keep,sub/"), "listing of %s: '%s'", dir, list);
    listing(join(dir, "sub"), list, sizeof list);
    CHECK(!strcmp(list, ""), "listing of sub: '%s'", list);
    errno = 0;
    CHECK(opendir(join(dir, "keep")) == NULL && errno == ENOTDIR, "opendir of a file: ENOTDIR");

    /* statvfs / statfs */
    struct statvfs sv;
    struct statfs sf;
    CHECK(statvfs(join(dir, "keep"), &sv) == 0 && sv.f_blocks > 0 && sv.f_bsize > 0 && sv.f_bfree <= sv.f_blocks,
          "statvfs keep");
    CHECK(statfs(join(dir, "keep"), &sf) == 0 && sf.f_blocks > 0 && sf.f_bsize > 0, "statfs keep");
    if (weft) CHECK(sf.f_type == 0x77656674, "statfs f_type %lx", (long)sf.f_type);
    errno = 0;
    CHECK(statvfs(join(dir, "missing"), &sv) == -1 && errno == ENOENT, "statvfs missing: ENOENT");

    /* unlink / remove */
    CHECK(unlink(join(dir, "c")) == 0, "unlink c");
    errno = 0;
    CHECK(stat(join(dir, "c"), &st) == -1 && errno == ENOENT, "stat c after unlink: ENOENT");
    errno = 0;
    CHECK(unlink(join(dir, "c")) == -1 && errno == ENOENT, "second unlink c: ENOENT");
    write_file(join(dir, "r"), "x");
    CHECK(remove(join(dir, "r")) == 0, "remove r (a file)");
    CHECK(remove(join(dir, "sub")) == 0, "remove sub (a directory)");
    listing(dir, list, sizeof list);
    CHECK(!strcmp(list, "keep"), "final listing of %s: '%s'", dir, list);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: posix_names weft:/DIR LOCAL_DIR\n"); return 2; }
    names(argv[1], 1);
    names(argv[2], 0);
    if (failures == 0) printf("posix_names OK\n");
    return failures != 0;
}
