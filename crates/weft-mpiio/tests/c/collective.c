/* Collective writes and reads through views, under one set of collective
 * hints; run on a weft: path (per method) and on a local path (ROMIO), and
 * the Rust test (tests/mpi_collective.rs) compares the files byte for byte.
 * Every read is checked here against what was written.
 *
 * usage: collective PREFIX MODE
 *   MODE: two_phase_small (two-phase forced, cb_buffer_size 8192 set with
 *         MPI_File_set_info: several rounds), cb1 / cb2 (two-phase forced,
 *         cb_nodes 1 / 2), datatype, automatic (two-phase only where ranks'
 *         ranges interleave)
 * Writes PREFIX.{ior,holes,resized,sub2,darray,sub3,mem,strided8,zero,blocks}
 * (and PREFIX.overlap on weft: paths). Prints per-rank STATS lines from the
 * library's debug counters (weft_mpiio_coll_stats, weft_mpiio_data_requests,
 * found with dlsym; zeros when absent). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC 47008
#define NREC 3

static int rank, nprocs, failures = 0, on_weft = 0;
static const char *mode;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define MPI_OK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; MPI_Error_string(rc_, s_, &l_); fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static MPI_Info hints(void) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "striping_unit", "4096");
    MPI_Info_set(info, "striping_factor", "2");
    if (strcmp(mode, "datatype") == 0) {
        MPI_Info_set(info, "weft_coll_method", "datatype");
    } else {
        MPI_Info_set(info, "weft_coll_method", "two_phase");
        const char *cb = strcmp(mode, "automatic") == 0 ? "automatic" : "enable";
        MPI_Info_set(info, "romio_cb_write", cb);
        MPI_Info_set(info, "romio_cb_read", cb);
        if (strcmp(mode, "cb1") == 0) MPI_Info_set(info, "cb_nodes", "1");
        if (strcmp(mode, "cb2") == 0) MPI_Info_set(info, "cb_nodes", "2");
    }
    return info;
}

static void expect_hint(MPI_File fh, const char *key, const char *expected) {
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    MPI_OK(MPI_File_get_info(fh, &info));
    MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag);
    CHECK(flag && strcmp(value, expected) == 0, "hint %s = %s, expected %s", key, flag ? value : "(unset)", expected);
    MPI_Info_free(&info);
}

/* Opens PREFIX.SUFFIX with the mode's hints and writes `background` bytes
 * of a pattern first (rank 0), so holes compare equal with ROMIO's files. */
static MPI_File open_new(const char *prefix, const char *suffix, int background) {
    char path[1024];
    MPI_File fh;
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    MPI_Info info = hints();
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    if (strcmp(mode, "two_phase_small") == 0) {
        /* Added after open: set_info merges with the open hints. */
        MPI_Info more;
        MPI_Info_create(&more);
        MPI_Info_set(more, "cb_buffer_size", "8192");
        MPI_OK(MPI_File_set_info(fh, more));
        MPI_Info_free(&more);
    }
    if (on_weft) {
        char ranks[16];
        snprintf(ranks, sizeof ranks, "%d", nprocs);
        expect_hint(fh, "weft_coll_method", strcmp(mode, "datatype") == 0 ? "datatype" : "two_phase");
        expect_hint(fh, "cb_nodes", strcmp(mode, "cb1") == 0 ? "1" : strcmp(mode, "cb2") == 0 ? (nprocs >= 2 ? "2" : "1") : ranks);
        expect_hint(fh, "cb_buffer_size", strcmp(mode, "two_phase_small") == 0 ? "8192" : "16777216");
        expect_hint(fh, "romio_cb_write", strcmp(mode, "automatic") == 0 || strcmp(mode, "datatype") == 0 ? "automatic" : "enable");
        expect_hint(fh, "striping_unit", "4096");
    }
    if (rank == 0 && background > 0) {
        unsigned char *pattern = malloc(background);
        for (int i = 0; i < background; i++) pattern[i] = (unsigned char)(i * 7 + 1);
        MPI_OK(MPI_File_write_at(fh, 0, pattern, background, MPI_BYTE, MPI_STATUS_IGNORE));
        free(pattern);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return fh;
}

static void expect_count(MPI_Status *status, MPI_Datatype type, int expected, const char *what) {
    int count = -1;
    MPI_Get_count(status, type, &count);
    CHECK(count == expected, "%s: MPI_Get_count %d, expected %d", what, count, expected);
}

static void fill_ints(int *data, int n, int salt) { for (int i = 0; i < n; i++) data[i] = rank * 100000 + salt * 1000 + i + 1; }
static void fill_bytes(unsigned char *data, int n, int salt) { for (int i = 0; i < n; i++) data[i] = (unsigned char)(rank * 37 + i * 11 + salt); }

/* Writes `n` elements of `type` with write_all (individual pointer) or
 * write_at_all, reads them back with the matching collective read. */
static void write_read(MPI_File fh, int at, MPI_Offset offset, void *out, void *in, size_t bytes, int n, MPI_Datatype type, const char *what) {
    MPI_Status st;
    if (at) MPI_OK(MPI_File_write_at_all(fh, offset, out, n, type, &st));
    else MPI_OK(MPI_File_write_all(fh, out, n, type, &st));
    expect_count(&st, type, n, what);
    if (!at) MPI_OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    memset(in, 0, bytes);
    if (at) MPI_OK(MPI_File_read_at_all(fh, offset, in, n, type, &st));
    else MPI_OK(MPI_File_read_all(fh, in, n, type, &st));
    expect_count(&st, type, n, what);
    CHECK(memcmp(in, out, bytes) == 0, "%s: read back differs", what);
}

/* ior-hard: records of 47,008 bytes interleaved over the ranks. */
static void scenario_ior(const char *prefix) {
    MPI_File fh = open_new(prefix, "ior", 0);
    MPI_Datatype ft;
    MPI_Type_vector(NREC, REC, REC * nprocs, MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * REC, MPI_BYTE, ft, "native", MPI_INFO_NULL));
    unsigned char *out = malloc(NREC * REC), *in = malloc(NREC * REC);
    fill_bytes(out, NREC * REC, 1);
    write_read(fh, 0, 0, out, in, NREC * REC, NREC * REC, MPI_BYTE, "ior");
    MPI_Offset pos;
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == NREC * REC, "ior position %lld", (long long)pos);
    free(out); free(in);
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* vector view with holes nobody writes; individual pointer */
static void scenario_holes(const char *prefix) {
    int row = 2 * nprocs + 1;
    MPI_File fh = open_new(prefix, "holes", 2 * 5 * row * 4 + 64);
    MPI_Datatype v, ft;
    MPI_Type_vector(5, 2, row, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, (MPI_Aint)5 * row * sizeof(int), &ft);
    MPI_Type_free(&v);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * 2 * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
    int out[20], in[20];
    fill_ints(out, 20, 2);
    write_read(fh, 0, 0, out, in, sizeof out, 20, MPI_INT, "holes");
    MPI_Offset pos;
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == 20, "holes position %lld", (long long)pos);
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* resized file type, explicit offsets, and a collective read across EOF */
static void scenario_resized(const char *prefix) {
    int tile = 3 * nprocs + 2;
    MPI_File fh = open_new(prefix, "resized", 6 * tile * 4);
    MPI_Datatype c3, ft;
    MPI_Type_contiguous(3, MPI_INT, &c3);
    MPI_Type_create_resized(c3, 0, (MPI_Aint)tile * sizeof(int), &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * 3 * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
    int out[12], in[12];
    fill_ints(out, 12, 3);
    write_read(fh, 1, 3, out, in, sizeof out, 12, MPI_INT, "resized");
    MPI_Offset size;
    MPI_OK(MPI_File_get_size(fh, &size));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char tail[100];
    MPI_Status st;
    /* Overlapping requests reaching past end of file: 40 bytes exist. */
    MPI_OK(MPI_File_read_at_all(fh, size - 40 + rank, tail, 100, MPI_BYTE, &st));
    /* ROMIO's collective reads report the requested count (checked on weft: only). */
    if (on_weft) expect_count(&st, MPI_BYTE, 40 - rank, "resized read_at_all across EOF");
    MPI_Type_free(&ft);
    MPI_Type_free(&c3);
    MPI_OK(MPI_File_close(&fh));
}

/* 2-D subarray; odd ranks contribute 0 bytes */
static void scenario_sub2(const char *prefix) {
    MPI_File fh = open_new(prefix, "sub2", 5 * 4 * nprocs * 4 + 32);
    int sizes[2] = {5, 4 * nprocs}, subsizes[2] = {3, 4}, starts[2] = {1, 4 * rank};
    MPI_Datatype ft;
    MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, 32, MPI_INT, ft, "native", MPI_INFO_NULL));
    int out[12], in[12], n = rank % 2 ? 0 : 12;
    fill_ints(out, 12, 4);
    /* The ranks with nothing pass a noncontiguous memory type with a
     * negative lower bound, as a library wrapping its own types might. */
    MPI_Datatype memory = MPI_INT, v, shifted = MPI_DATATYPE_NULL;
    if (n == 0) {
        MPI_Type_vector(3, 1, 2, MPI_INT, &v);
        MPI_Type_create_resized(v, -8, 40, &shifted);
        MPI_Type_free(&v);
        MPI_Type_commit(&shifted);
        memory = shifted;
    }
    write_read(fh, 0, 0, out, in, n * sizeof(int), n, memory, "sub2");
    if (shifted != MPI_DATATYPE_NULL) MPI_Type_free(&shifted);
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* 2-D darray, block x cyclic(2) */
static void scenario_darray(const char *prefix) {
    MPI_File fh = open_new(prefix, "darray", 8 * 6 * 4);
    int gsizes[2] = {8, 6}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psizes[2] = {0, 0};
    MPI_Dims_create(nprocs, 2, psizes);
    MPI_Datatype ft;
    MPI_Type_create_darray(nprocs, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    int size;
    MPI_Type_size(ft, &size);
    int n = size / (int)sizeof(int), out[48], in[48];
    fill_ints(out, n, 5);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
    write_read(fh, 0, 0, out, in, n * sizeof(int), n, MPI_INT, "darray");
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* 3-D subarray (Fortran order) with whole planes nobody writes */
static void scenario_sub3(const char *prefix) {
    int sizes[3] = {2 * nprocs, 3, 4}, subsizes[3] = {2, 3, 2}, starts[3] = {2 * rank, 0, 1};
    MPI_File fh = open_new(prefix, "sub3", 2 * nprocs * 3 * 4 * 8 + 8);
    MPI_Datatype ft;
    MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, 8, MPI_DOUBLE, ft, "native", MPI_INFO_NULL));
    double out[12], in[12];
    for (int i = 0; i < 12; i++) out[i] = rank * 100.0 + i + 0.5;
    write_read(fh, 0, 0, out, in, sizeof out, 12, MPI_DOUBLE, "sub3");
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* noncontiguous memory type: holes in memory stay untouched by reads */
static void scenario_mem(const char *prefix) {
    MPI_File fh = open_new(prefix, "mem", 0);
    MPI_Datatype c2, ft, mt;
    MPI_Type_contiguous(2, MPI_INT, &c2);
    MPI_Type_create_resized(c2, 0, (MPI_Aint)2 * nprocs * sizeof(int), &ft);
    MPI_Type_commit(&ft);
    MPI_Type_vector(6, 1, 2, MPI_INT, &mt);
    MPI_Type_commit(&mt);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * 2 * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
    int out[11], in[11];
    MPI_Status st;
    fill_ints(out, 11, 6);
    MPI_OK(MPI_File_write_at_all(fh, 0, out, 1, mt, &st));
    for (int i = 0; i < 11; i++) in[i] = -7;
    MPI_OK(MPI_File_read_at_all(fh, 0, in, 1, mt, &st));
    expect_count(&st, MPI_INT, 6, "mem read");
    for (int i = 0; i < 11; i++)
        CHECK(in[i] == (i % 2 ? -7 : out[i]), "mem: element %d is %d", i, in[i]);
    MPI_Type_free(&mt);
    MPI_Type_free(&ft);
    MPI_Type_free(&c2);
    MPI_OK(MPI_File_close(&fh));
}

/* the strided small-region pattern: 8-byte regions interleaved */
static void scenario_strided8(const char *prefix) {
    MPI_File fh = open_new(prefix, "strided8", 0);
    MPI_Datatype v, ft;
    MPI_Type_vector(64, 8, 8 * nprocs, MPI_BYTE, &v);
    MPI_Type_create_resized(v, 0, (MPI_Aint)64 * 8 * nprocs, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * 8, MPI_BYTE, ft, "native", MPI_INFO_NULL));
    unsigned char out[1024], in[1024];
    fill_bytes(out, 1024, 7);
    write_read(fh, 0, 0, out, in, sizeof out, 1024, MPI_BYTE, "strided8");
    MPI_Type_free(&ft);
    MPI_Type_free(&v);
    MPI_OK(MPI_File_close(&fh));
}

/* count 0 everywhere: nothing written, status 0 */
static void scenario_zero(const char *prefix) {
    MPI_File fh = open_new(prefix, "zero", 0);
    int buf[1] = {0};
    MPI_Status st;
    MPI_OK(MPI_File_write_all(fh, buf, 0, MPI_INT, &st));
    expect_count(&st, MPI_INT, 0, "zero write_all");
    MPI_OK(MPI_File_read_at_all(fh, 0, buf, 0, MPI_INT, &st));
    expect_count(&st, MPI_INT, 0, "zero read_at_all");
    /* count 0 of noncontiguous memory types (one with a negative lower bound) */
    MPI_Datatype v, shifted;
    MPI_Type_vector(3, 1, 2, MPI_INT, &v);
    MPI_Type_create_resized(v, -8, 40, &shifted);
    MPI_Type_commit(&v);
    MPI_Type_commit(&shifted);
    MPI_OK(MPI_File_write_at_all(fh, 0, buf, 0, v, &st));
    expect_count(&st, MPI_INT, 0, "zero write_at_all vector");
    MPI_OK(MPI_File_read_all(fh, buf, 0, shifted, &st));
    expect_count(&st, MPI_INT, 0, "zero read_all resized");
    MPI_Type_free(&v);
    MPI_Type_free(&shifted);
    MPI_Offset size;
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == 0, "zero: size %lld", (long long)size);
    MPI_OK(MPI_File_close(&fh));
}

/* disjoint contiguous blocks: not interleaved (automatic: datatype) */
static void scenario_blocks(const char *prefix) {
    MPI_File fh = open_new(prefix, "blocks", 0);
    unsigned char out[5000], in[5000];
    fill_bytes(out, sizeof out, 8);
    write_read(fh, 1, (MPI_Offset)rank * 5000, out, in, sizeof out, (int)sizeof out, MPI_BYTE, "blocks");
    MPI_OK(MPI_File_close(&fh));
}

/* Overlapping collective writes (weft only: MPI leaves the result
 * undefined). Under two-phase the highest rank wins, as documented; under
 * datatype every byte is some rank's. */
static void scenario_overlap(const char *prefix) {
    MPI_File fh = open_new(prefix, "overlap", 0);
    unsigned char out[3000], in[3000];
    memset(out, rank + 1, sizeof out);
    MPI_Status st;
    MPI_OK(MPI_File_write_at_all(fh, rank * 10, out, (int)sizeof out - rank * 10, MPI_BYTE, &st));
    MPI_OK(MPI_File_read_at_all(fh, 0, in, (int)sizeof in, MPI_BYTE, &st));
    int two_phase = strcmp(mode, "datatype") != 0;
    for (int i = 0; i < (int)sizeof in; i++) {
        int writer = i / 10 < nprocs - 1 ? i / 10 + 1 : nprocs; /* highest rank covering byte i, plus one */
        if (two_phase) CHECK(in[i] == writer, "overlap: byte %d is %d, expected %d", i, in[i], writer);
        else CHECK(in[i] >= 1 && in[i] <= writer, "overlap: byte %d is %d", i, in[i]);
        if (in[i] != writer && two_phase) break;
    }
    MPI_OK(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: collective PREFIX MODE\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *prefix = argv[1];
    mode = argv[2];
    on_weft = strncmp(prefix, "weft:", 5) == 0;
    scenario_ior(prefix);
    scenario_holes(prefix);
    scenario_resized(prefix);
    scenario_sub2(prefix);
    scenario_darray(prefix);
    scenario_sub3(prefix);
    scenario_mem(prefix);
    scenario_strided8(prefix);
    scenario_zero(prefix);
    scenario_blocks(prefix);
    if (on_weft) {
        scenario_overlap(prefix);
        /* Defaults reported for a file opened without hints, and with
         * unparsable ones (ignored, as ROMIO does). */
        char path[1024], ranks[16];
        MPI_File fh;
        MPI_Info junk;
        MPI_Info_create(&junk);
        MPI_Info_set(junk, "weft_coll_method", "three_phase");
        MPI_Info_set(junk, "romio_cb_write", "sometimes");
        MPI_Info_set(junk, "cb_nodes", "many");
        MPI_Info_set(junk, "cb_buffer_size", "-5");
        MPI_Info infos[2] = {MPI_INFO_NULL, junk};
        snprintf(path, sizeof path, "%s.defaults", prefix);
        snprintf(ranks, sizeof ranks, "%d", nprocs);
        for (int k = 0; k < 2; k++) {
            MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, infos[k], &fh));
            expect_hint(fh, "weft_coll_method", "datatype");
            expect_hint(fh, "romio_cb_write", "automatic");
            expect_hint(fh, "romio_cb_read", "automatic");
            expect_hint(fh, "cb_nodes", ranks);
            expect_hint(fh, "cb_buffer_size", "16777216");
            MPI_OK(MPI_File_close(&fh));
        }
        MPI_Info_free(&junk);
    }

    long long two_phase = 0, datatype = 0, rounds = 0;
    int64_t requests = 0, bytes = 0;
    int (*stats)(long long *, long long *, long long *) = (int (*)(long long *, long long *, long long *))dlsym(RTLD_DEFAULT, "weft_mpiio_coll_stats");
    int (*data)(int64_t *, int64_t *) = (int (*)(int64_t *, int64_t *))dlsym(RTLD_DEFAULT, "weft_mpiio_data_requests");
    if (stats) stats(&two_phase, &datatype, &rounds);
    if (data && on_weft) data(&requests, &bytes);
    for (int r = 0; r < nprocs; r++) {
        if (r == rank)
            printf("STATS rank=%d two_phase=%lld datatype=%lld rounds=%lld data_requests=%lld data_bytes=%lld\n", rank, two_phase,
                   datatype, rounds, (long long)requests, (long long)bytes);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total == 0 ? "collective OK\n" : "collective FAILED (%d)\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
