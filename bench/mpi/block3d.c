/* 3-D block (ROMIO's coll_perf, Ching ch.4): an N x N x N cube of 4-byte
 * ints in C order, block-distributed over the processes (process grid
 * from MPI_Dims_create, file view MPI_Type_create_darray with
 * MPI_DISTRIBUTE_BLOCK in every dimension), each process's block
 * contiguous in memory; the whole block is written with one call, then
 * read with one call.
 *
 *   block3d --path PATH [options]
 *
 * Thesis size: N = 600 (864 MB) over 8, 27 or 64 processes; at 8
 * processes each has 300^3 ints = 90,000 file regions of 1,200 bytes.
 *
 * Per method (apps.h): write (timed), the whole file checked byte for
 * byte (untimed), read (timed), every int read checked (untimed); each
 * method writes a different pattern.
 *
 * Options: --size N (600)  --methods LIST (all of apps.h)
 *   --sync (MPI_File_sync inside the timed write)  --keep (leave the file)
 * One JSON object per (method, phase) on stdout. */
#include "apps.h"

#include <getopt.h>

typedef struct {
    long long n;
    int dims[3];
    long long start[3], local[3];
    int sync; /* MPI_File_sync inside the timed write */
} cube_t;

static void cube_init(cube_t *c, long long n, int sync) {
    c->n = n;
    c->sync = sync;
    c->dims[0] = c->dims[1] = c->dims[2] = 0;
    MPI_CHECK(MPI_Dims_create(g_procs, 3, c->dims));
    int coords[3] = {g_rank / (c->dims[1] * c->dims[2]), (g_rank / c->dims[2]) % c->dims[1], g_rank % c->dims[2]};
    for (int d = 0; d < 3; d++) {
        long long block = (n + c->dims[d] - 1) / c->dims[d];
        long long first = coords[d] * block, end = first + block < n ? first + block : n;
        c->start[d] = first < n ? first : n;
        c->local[d] = end > c->start[d] ? end - c->start[d] : 0;
    }
}

static long long cube_local_ints(const cube_t *c) { return c->local[0] * c->local[1] * c->local[2]; }

/* Fills (pattern) or checks the local block in buf, one row of ints at a time. */
static long long cube_pattern(const cube_t *c, unsigned char *buf, uint64_t file_id, int check) {
    long long bad = 0, row_bytes = c->local[2] * 4;
    for (long long i = 0; i < c->local[0]; i++)
        for (long long j = 0; j < c->local[1]; j++) {
            unsigned char *p = buf + (i * c->local[1] + j) * row_bytes;
            uint64_t off = (uint64_t)((((c->start[0] + i) * c->n + c->start[1] + j) * c->n + c->start[2]) * 4);
            if (check) bad += pattern_check(p, file_id, off, (size_t)row_bytes, "block3d read");
            else pattern_fill(p, file_id, off, (size_t)row_bytes);
        }
    return bad;
}

typedef struct {
    const cube_t *c;
    unsigned char *rbuf;
} cube_read_t;

static long long check_cube(const void *ctx, uint64_t file_id) {
    const cube_read_t *r = ctx;
    return cube_pattern(r->c, r->rbuf, file_id, 1);
}

static void run_method(const char *path, const void *ctx_cube, const char *name, uint64_t file_id) {
    const cube_t *c = ctx_cube;
    method_t m = method_make(name);
    int gsizes[3] = {(int)c->n, (int)c->n, (int)c->n}, distribs[3], dargs[3];
    for (int d = 0; d < 3; d++) distribs[d] = MPI_DISTRIBUTE_BLOCK, dargs[d] = MPI_DISTRIBUTE_DFLT_DARG;
    MPI_Datatype filetype;
    MPI_CHECK(MPI_Type_create_darray(g_procs, g_rank, 3, gsizes, distribs, dargs, (int *)c->dims, MPI_ORDER_C, MPI_INT,
                                     &filetype));
    MPI_CHECK(MPI_Type_commit(&filetype));
    long long ints = cube_local_ints(c), total = c->n * c->n * c->n * 4;
    unsigned char *wbuf = malloc((size_t)ints * 4 + 1), *rbuf = calloc((size_t)ints * 4 + 1, 1);
    if (!wbuf || !rbuf) die("out of memory");
    cube_pattern(c, wbuf, file_id, 0);
    access_t write = {0, MPI_INT, filetype, 0, wbuf, (int)ints, MPI_INT}, read = write;
    read.buf = rbuf;
    cube_read_t ctx = {c, rbuf};
    double seconds[2];
    app_run("block3d", path, &m, file_id, c->sync, 0, &write, 1, &read, 1, total, check_cube, &ctx, seconds);

    char grid[64];
    snprintf(grid, sizeof grid, "%dx%dx%d", c->dims[0], c->dims[1], c->dims[2]);
    const char *phases[] = {"write", "read"};
    for (int p = 0; p < 2; p++) {
        json_t j;
        app_json(&j, "block3d", path, name, phases[p], total, seconds[p]);
        json_int(&j, "size", c->n);
        json_str(&j, "grid", grid);
        json_int(&j, "regions_per_proc", c->local[0] * c->local[1]);
        json_int(&j, "region_bytes", c->local[2] * 4);
        json_end(&j);
    }
    MPI_Type_free(&filetype);
    free(wbuf), free(rbuf);
    method_free(&m);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    const char *path = NULL, *methods = APP_METHODS;
    long long n = 600;
    int sync = 0, keep = 0;
    static struct option opts[] = {{"path", 1, 0, 'p'}, {"methods", 1, 0, 'm'}, {"size", 1, 0, 'n'},
                                   {"sync", 0, 0, 's'}, {"keep", 0, 0, 'k'},    {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': path = optarg; break;
        case 'm': methods = optarg; break;
        case 'n': n = atoll(optarg); break;
        case 's': sync = 1; break;
        case 'k': keep = 1; break;
        default: die("unknown option");
        }
    }
    if (!path) die("--path is required");
    if (n < 1 || n > 1290) die("--size must be 1..1290 (int counts)");
    cube_t cube;
    cube_init(&cube, n, sync);
    app_each_method(path, methods, 200, keep, run_method, &cube);
    MPI_Finalize();
    return 0;
}
