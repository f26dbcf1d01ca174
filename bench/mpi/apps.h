/* Helpers shared by the application benchmarks of bench/mpi (tile_io,
 * block3d, flash_io, s3d_io): the I/O methods and their hints, one timed
 * access through a view, and the untimed checks of what was written.
 *
 * A method is a set of hints plus independent or collective calls. Both
 * Weft's and ROMIO's hints are always set; each library ignores the
 * other's:
 *   posix      independent; weft_io_method=posix (one request per
 *              contiguous piece); ROMIO romio_ds_read/write=disable
 *   sieving    independent; weft_io_method=sieve (Weft sieves on the
 *              servers); ROMIO romio_ds_read/write=enable
 *   list       independent; weft_io_method=list (up to 65,536 regions per
 *              request); ROMIO has no list I/O on a local file system:
 *              romio_ds_*=disable (as posix)
 *   list-64    as list, capped at 64 regions per request
 *              (weft_list_regions=64: the list I/O of ROMIO's PVFS2 driver
 *              and Ching's thesis); not in APP_METHODS, the tile reader
 *              adds it (APP_METHODS_ALL names every method)
 *   datatype   independent; weft_io_method=datatype; ROMIO's defaults
 *   two-phase  collective; weft_coll_method=two_phase and
 *              romio_cb_read/write=enable (both libraries)
 *   coll-datatype  collective; weft_coll_method=datatype (each rank's own
 *              datatype request); ROMIO romio_cb_read/write=disable
 * The JSON says which method ran; on a local path the label names the
 * ROMIO hints above, not a Weft method. */
#ifndef WEFT_BENCH_MPI_APPS_H
#define WEFT_BENCH_MPI_APPS_H

#include "common.h"

#define APP_METHODS "posix,sieving,list,datatype,two-phase,coll-datatype"
#define APP_METHODS_ALL APP_METHODS ",list-64"

typedef struct {
    const char *name;
    int collective;
    MPI_Info info;
} method_t;

/* The hints of `name` (see the top of this file); dies on an unknown name. */
static inline method_t method_make(const char *name) {
    static const char *const table[][7] = {
        /* name, collective, weft_io_method, weft_coll_method, romio_ds, romio_cb, weft_list_regions */
        {"posix", "0", "posix", "datatype", "disable", "disable", NULL},
        {"sieving", "0", "sieve", "datatype", "enable", "disable", NULL},
        {"list", "0", "list", "datatype", "disable", "disable", NULL},
        {"datatype", "0", "datatype", "datatype", "automatic", "automatic", NULL},
        {"two-phase", "1", "datatype", "two_phase", "automatic", "enable", NULL},
        {"coll-datatype", "1", "datatype", "datatype", "automatic", "disable", NULL},
        {"list-64", "0", "list", "datatype", "disable", "disable", "64"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i][0], name) != 0) continue;
        method_t m = {table[i][0], table[i][1][0] == '1', MPI_INFO_NULL};
        MPI_Info_create(&m.info);
        MPI_Info_set(m.info, "weft_io_method", (char *)table[i][2]);
        MPI_Info_set(m.info, "weft_coll_method", (char *)table[i][3]);
        MPI_Info_set(m.info, "romio_ds_read", (char *)table[i][4]);
        MPI_Info_set(m.info, "romio_ds_write", (char *)table[i][4]);
        MPI_Info_set(m.info, "romio_cb_read", (char *)table[i][5]);
        MPI_Info_set(m.info, "romio_cb_write", (char *)table[i][5]);
        if (table[i][6]) MPI_Info_set(m.info, "weft_list_regions", (char *)table[i][6]);
        return m;
    }
    die("unknown method %s (known: %s)", name, APP_METHODS_ALL);
    return (method_t){0};
}

/* Dies unless every name in the comma-separated list is a method. */
static inline void methods_check(const char *list) {
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        method_t m = method_make(tok);
        MPI_Info_free(&m.info);
    }
    free(copy);
}

static inline void method_free(method_t *m) {
    if (m->info != MPI_INFO_NULL) MPI_Info_free(&m->info);
}

/* One read or write of `count` items of `type` at view offset `offset`
 * (in etypes), collective or not; dies unless every item moved. */
static inline void app_access(MPI_File fh, int writing, int collective, MPI_Offset offset, void *buf, int count,
                              MPI_Datatype type) {
    MPI_Status st;
    if (writing && collective) MPI_CHECK(MPI_File_write_at_all(fh, offset, buf, count, type, &st));
    else if (writing) MPI_CHECK(MPI_File_write_at(fh, offset, buf, count, type, &st));
    else if (collective) MPI_CHECK(MPI_File_read_at_all(fh, offset, buf, count, type, &st));
    else MPI_CHECK(MPI_File_read_at(fh, offset, buf, count, type, &st));
    int got = 0;
    MPI_Get_count(&st, type, &got);
    if (got != count) die("%s moved %d of %d items", writing ? "write" : "read", got, count);
}

/* Untimed check of a densely written file: its size is `size` bytes and
 * byte `off` is pattern_byte(file_id, off). Each rank reads its share
 * contiguously through a plain byte view (so the check does not use the
 * views being measured). Returns the number of wrong bytes, all ranks. */
static inline long long verify_dense(MPI_File fh, uint64_t file_id, long long size, const char *what) {
    MPI_Offset actual = 0;
    MPI_CHECK(MPI_File_get_size(fh, &actual));
    if (actual != size) die("%s: file is %lld bytes, expected %lld", what, (long long)actual, size);
    MPI_CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    long long share = (size + g_procs - 1) / g_procs, first = share * g_rank;
    long long last = first + share < size ? first + share : size, bad = 0;
    const long long chunk_bytes = 4 << 20;
    unsigned char *buf = malloc((size_t)chunk_bytes);
    if (!buf) die("out of memory");
    for (long long off = first; off < last && bad == 0; off += chunk_bytes) {
        int len = (int)(last - off < chunk_bytes ? last - off : chunk_bytes);
        app_access(fh, 0, 0, off, buf, len, MPI_BYTE);
        bad += pattern_check(buf, file_id, (uint64_t)off, (size_t)len, what);
    }
    free(buf);
    return sum_all(bad);
}

/* Seconds since the barrier before `t0`: the slowest rank's. */
static inline double app_elapsed(double t0) {
    MPI_Barrier(MPI_COMM_WORLD);
    return max_all(MPI_Wtime() - t0);
}

static inline double app_start(void) {
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime();
}

/* One call of a phase: `count` items of `memtype` at `buf`, at view
 * offset `offset` (etypes) of the view (disp, etype, filetype). */
typedef struct {
    MPI_Offset disp;
    MPI_Datatype etype, filetype;
    MPI_Offset offset;
    void *buf;
    int count;
    MPI_Datatype memtype;
} access_t;

/* The calls of one phase, timed (barrier to barrier, slowest rank); the
 * view is set only when it changes (set_view is collective). */
static inline double app_phase(MPI_File fh, const method_t *m, int writing, int sync, const access_t *a, int n) {
    double t0 = app_start();
    for (int i = 0; i < n; i++) {
        if (i == 0 || a[i].disp != a[i - 1].disp || a[i].etype != a[i - 1].etype || a[i].filetype != a[i - 1].filetype)
            MPI_CHECK(MPI_File_set_view(fh, a[i].disp, a[i].etype, a[i].filetype, "native", m->info));
        app_access(fh, writing, m->collective, a[i].offset, a[i].buf, a[i].count, a[i].memtype);
    }
    if (writing && sync) MPI_CHECK(MPI_File_sync(fh));
    return app_elapsed(t0);
}

/* What one method does in every application benchmark: open `path`
 * with the method's hints, the write phase (timed), the whole file
 * (`file_bytes`) checked byte for byte (untimed), the read phase (timed;
 * the read buffers must be cleared by the caller), `check_read` on what
 * was read (untimed; returns this rank's wrong bytes), close. Dies on any
 * difference. Puts the write and read seconds in seconds[2]. */
static inline void app_run(const char *bench, const char *path, const method_t *m, uint64_t file_id, int sync, int atomic,
                           const access_t *writes, int nwrites, const access_t *reads, int nreads, long long file_bytes,
                           long long (*check_read)(const void *ctx, uint64_t file_id), const void *ctx,
                           double seconds[2]) {
    MPI_File fh;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, m->info, &fh));
    if (atomic) MPI_CHECK(MPI_File_set_atomicity(fh, 1));
    seconds[0] = app_phase(fh, m, 1, sync, writes, nwrites);
    if (verify_dense(fh, file_id, file_bytes, bench)) die("%s %s: file differs after write", bench, m->name);
    seconds[1] = app_phase(fh, m, 0, 0, reads, nreads);
    if (sum_all(check_read(ctx, file_id))) die("%s %s: read back wrong data", bench, m->name);
    MPI_CHECK(MPI_File_close(&fh));
}

/* A program's work for one method; file_id is the method's own pattern. */
typedef void (*method_fn)(const char *path, const void *ctx, const char *method, uint64_t file_id);

/* Runs `run` for each method of apps.h named in `methods` (in the order
 * above; method i gets pattern id_base + 2 i, so a program may use the odd
 * id too) on a fresh file, deleted afterwards unless `keep`. */
static inline void app_each_method(const char *path, const char *methods, uint64_t id_base, int keep, method_fn run,
                                   const void *ctx) {
    static const char *const all[] = {"posix", "sieving", "list", "datatype", "two-phase", "coll-datatype", "list-64"};
    methods_check(methods);
    if (g_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++)
        if (list_has(methods, all[i])) run(path, ctx, all[i], id_base + 2 * (uint64_t)i);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0 && !keep) MPI_File_delete(path, MPI_INFO_NULL);
}

/* The fields every application result has. */
static inline void app_json(json_t *j, const char *bench, const char *path, const char *method, const char *phase,
                            long long bytes, double seconds) {
    json_begin(j, bench);
    json_str(j, "fs", fs_of(path));
    json_str(j, "method", method);
    json_str(j, "phase", phase);
    json_int(j, "procs", g_procs);
    json_int(j, "bytes", bytes);
    json_num(j, "seconds", seconds);
    json_num(j, "mib_per_s", mib_per_s(bytes, seconds));
}

#endif
