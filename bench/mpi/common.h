/* Helpers shared by the MPI-IO benchmarks in bench/mpi: sizes, lists,
 * checked MPI calls, a deterministic data pattern and JSON output.
 *
 * Everything here is standard MPI, so the programs run unmodified on
 * `weft:` paths (with libweft_mpiio preloaded) and on local paths (through
 * the MPI library's own MPI-IO, e.g. ROMIO).
 *
 * What still repeats between the programs (a review with `duplicates`
 * lists it) is accepted: each main() has its own getopt_long table and
 * ends by freeing its types and buffers, which read best in place; and
 * mpi_peak.c reads /proc/self/status as the test tests/c/peak_rss.c does,
 * because benchmarks and tests share no code (a benchmark must build from
 * bench/mpi alone). */
#ifndef WEFT_BENCH_MPI_COMMON_H
#define WEFT_BENCH_MPI_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_procs;

static inline void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: ", g_rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* Checks an MPI call that must succeed; names the call and the error. */
#define MPI_CHECK(call)                                                                  \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != MPI_SUCCESS) {                                                        \
            char msg_[MPI_MAX_ERROR_STRING];                                             \
            int len_ = 0, class_ = 0;                                                    \
            MPI_Error_string(rc_, msg_, &len_);                                          \
            MPI_Error_class(rc_, &class_);                                               \
            die("%s:%d: %s failed (class %d): %s", __FILE__, __LINE__, #call, class_, msg_); \
        }                                                                                \
    } while (0)

/* "64M" -> 67108864 (suffixes k, M, G: powers of 1024). */
static inline long long parse_size(const char *text) {
    char *end = NULL;
    double v = strtod(text, &end);
    switch (end && *end ? *end : ' ') {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return (long long)v;
}

/* Comma-separated sizes into out[] (at most max); returns the count. */
static inline int parse_list(const char *text, long long *out, int max) {
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) out[n++] = parse_size(tok);
    free(copy);
    return n;
}

/* Whether comma-separated `list` contains `word`. */
static inline int list_has(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* "weft" for weft: paths, "local" otherwise (what the JSON calls `fs`). */
static inline const char *fs_of(const char *path) { return strncmp(path, "weft:", 5) == 0 ? "weft" : "local"; }

/* The data pattern: the byte at file offset `off` of file `file_id`.
 * Cheap, position-dependent and different between files. */
static inline unsigned char pattern_byte(uint64_t file_id, uint64_t off) {
    uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull + file_id * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 29;
    return (unsigned char)(x >> (8 * (off & 7)));
}

static inline void pattern_fill(unsigned char *buf, uint64_t file_id, uint64_t off, size_t len) {
    for (size_t i = 0; i < len; i++) buf[i] = pattern_byte(file_id, off + i);
}

/* Number of bytes of buf that differ from the pattern (prints the first). */
static inline long long pattern_check(const unsigned char *buf, uint64_t file_id, uint64_t off, size_t len, const char *what) {
    long long bad = 0;
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern_byte(file_id, off + i)) {
            if (bad == 0)
                fprintf(stderr, "rank %d: %s: byte at file offset %llu is %u, expected %u\n", g_rank, what,
                        (unsigned long long)(off + i), buf[i], pattern_byte(file_id, off + i));
            bad++;
        }
    return bad;
}

/* Sum of a per-rank count over all ranks. */
static inline long long sum_all(long long v) {
    long long total = 0;
    MPI_Allreduce(&v, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

static inline double max_all(double v) {
    double m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* JSON output: rank 0 builds one object per result and prints it on one line. */
typedef struct {
    char text[2048];
    size_t len;
} json_t;

static inline void json_begin(json_t *j, const char *bench) {
    j->len = (size_t)snprintf(j->text, sizeof j->text, "{\"bench\":\"%s\"", bench);
}
static inline void json_str(json_t *j, const char *key, const char *value) {
    j->len += (size_t)snprintf(j->text + j->len, sizeof j->text - j->len, ",\"%s\":\"%s\"", key, value);
}
static inline void json_int(json_t *j, const char *key, long long value) {
    j->len += (size_t)snprintf(j->text + j->len, sizeof j->text - j->len, ",\"%s\":%lld", key, value);
}
static inline void json_num(json_t *j, const char *key, double value) {
    j->len += (size_t)snprintf(j->text + j->len, sizeof j->text - j->len, ",\"%s\":%.6g", key, value);
}
static inline void json_end(json_t *j) {
    if (g_rank == 0) {
        printf("%s}\n", j->text);
        fflush(stdout);
    }
}

static inline double mib_per_s(long long bytes, double seconds) { return seconds > 0 ? (double)bytes / 1048576.0 / seconds : 0; }

/* MPI_Info with striping_unit (bytes) if > 0, and weft_io_method if set. */
static inline MPI_Info make_info(long long striping_unit, const char *io_method) {
    MPI_Info info = MPI_INFO_NULL;
    if (striping_unit > 0 || (io_method && *io_method)) {
        MPI_Info_create(&info);
        if (striping_unit > 0) {
            char v[32];
            snprintf(v, sizeof v, "%lld", striping_unit);
            MPI_Info_set(info, "striping_unit", v);
        }
        if (io_method && *io_method) MPI_Info_set(info, "weft_io_method", (char *)io_method);
    }
    return info;
}

#endif
