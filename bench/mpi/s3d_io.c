/* S3D-IO (Ching ch.5, the lock chapter's workload): a checkpoint of four
 * global double arrays of an NX x NY x NZ grid, each with components:
 * mass fractions (11), velocity (3), pressure (1), temperature (1), split
 * block-block-block over the processes and written to one shared file in
 * canonical order: array after array, each component after the other, each
 * component a Fortran-order XYZ array (x fastest), as S3D writes it.
 *
 *   s3d_io --path PATH [options]
 *
 * The process grid comes from MPI_Dims_create (its first dimension splits
 * Z, the last X); NX, NY, NZ must divide evenly. Each process holds each
 * array contiguously in memory (component, z, y, x); per array one call
 * through a subarray file view at the array's displacement (four views and
 * four calls per checkpoint; the file regions are X-rows of NX/px doubles).
 * Thesis: about 1.19 GB in total, processes swept 1..64 (grid not given);
 * the default 200^3 grid is 1.02 GB.
 *
 * Per method (apps.h) and atomicity (MPI_File_set_atomicity 0 or 1 right
 * after open): checkpoint write (timed), the whole file checked byte for
 * byte (untimed), restart read (timed), every value read checked (untimed).
 *
 * Options: --grid NXxNYxNZ (200x200x200)  --methods LIST (all of apps.h)
 *   --atomic off,on (both)  --sync (MPI_File_sync inside the timed write)
 *   --keep (leave the file)
 * One JSON object per (method, atomicity, phase) on stdout. */
#include "apps.h"

#include <getopt.h>

#define S3D_ARRAYS 4
static const int components[S3D_ARRAYS] = {11, 3, 1, 1};

typedef struct {
    long long n[3];                   /* NX, NY, NZ */
    int dims[3];                      /* processes along Z, Y, X */
    long long local[3], start[3];     /* x, y, z */
    long long disp[S3D_ARRAYS];       /* file displacement of each array */
    long long mem_bytes[S3D_ARRAYS];  /* one process's part of each array */
    long long file_bytes;
    const char *atomic;               /* "off", "on" or both */
    int sync;                         /* MPI_File_sync inside the timed write */
} s3d_t;

static void s3d_init(s3d_t *s) {
    s->dims[0] = s->dims[1] = s->dims[2] = 0;
    MPI_CHECK(MPI_Dims_create(g_procs, 3, s->dims));
    int coords[3] = {g_rank / (s->dims[1] * s->dims[2]), (g_rank / s->dims[2]) % s->dims[1], g_rank % s->dims[2]};
    for (int d = 0; d < 3; d++) { /* d: x, y, z; the grid's dimension 2 - d */
        int procs = s->dims[2 - d];
        if (s->n[d] % procs) die("grid dimension %lld does not divide over %d processes", s->n[d], procs);
        s->local[d] = s->n[d] / procs;
        s->start[d] = coords[2 - d] * s->local[d];
    }
    long long points = s->n[0] * s->n[1] * s->n[2], local = s->local[0] * s->local[1] * s->local[2], at = 0;
    for (int a = 0; a < S3D_ARRAYS; a++) {
        s->disp[a] = at;
        s->mem_bytes[a] = components[a] * local * 8;
        at += components[a] * points * 8;
    }
    s->file_bytes = at;
}

/* Fills (pattern) or checks array a of one process, an X-row at a time. */
static long long s3d_pattern(const s3d_t *s, int a, unsigned char *buf, uint64_t file_id, int check) {
    long long bad = 0, row_bytes = s->local[0] * 8;
    unsigned char *p = buf;
    for (long long c = 0; c < components[a]; c++)
        for (long long z = 0; z < s->local[2]; z++)
            for (long long y = 0; y < s->local[1]; y++, p += row_bytes) {
                long long point = ((c * s->n[2] + s->start[2] + z) * s->n[1] + s->start[1] + y) * s->n[0] + s->start[0];
                uint64_t off = (uint64_t)(s->disp[a] + point * 8);
                if (check) bad += pattern_check(p, file_id, off, (size_t)row_bytes, "s3d read");
                else pattern_fill(p, file_id, off, (size_t)row_bytes);
            }
    return bad;
}

typedef struct {
    const s3d_t *s;
    unsigned char **bufs;
} s3d_read_t;

static long long check_s3d(const void *ctx, uint64_t file_id) {
    const s3d_read_t *r = ctx;
    long long bad = 0;
    for (int a = 0; a < S3D_ARRAYS; a++) bad += s3d_pattern(r->s, a, r->bufs[a], file_id, 1);
    return bad;
}

static void run_atomicity(const char *path, const s3d_t *s, const char *name, int atomic, uint64_t file_id) {
    method_t m = method_make(name);
    MPI_Datatype types[S3D_ARRAYS];
    unsigned char *wbufs[S3D_ARRAYS], *rbufs[S3D_ARRAYS];
    access_t writes[S3D_ARRAYS], reads[S3D_ARRAYS];
    for (int a = 0; a < S3D_ARRAYS; a++) {
        int sizes[4] = {components[a], (int)s->n[2], (int)s->n[1], (int)s->n[0]};
        int subsizes[4] = {components[a], (int)s->local[2], (int)s->local[1], (int)s->local[0]};
        int starts[4] = {0, (int)s->start[2], (int)s->start[1], (int)s->start[0]};
        MPI_CHECK(MPI_Type_create_subarray(4, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &types[a]));
        MPI_CHECK(MPI_Type_commit(&types[a]));
        wbufs[a] = malloc((size_t)s->mem_bytes[a]);
        rbufs[a] = calloc((size_t)s->mem_bytes[a], 1);
        if (!wbufs[a] || !rbufs[a]) die("out of memory");
        s3d_pattern(s, a, wbufs[a], file_id, 0);
        int count = (int)(s->mem_bytes[a] / 8);
        writes[a] = (access_t){s->disp[a], MPI_DOUBLE, types[a], 0, wbufs[a], count, MPI_DOUBLE};
        reads[a] = writes[a];
        reads[a].buf = rbufs[a];
    }
    s3d_read_t ctx = {s, rbufs};
    double seconds[2];
    app_run("s3d_io", path, &m, file_id, s->sync, atomic, writes, S3D_ARRAYS, reads, S3D_ARRAYS, s->file_bytes, check_s3d,
            &ctx, seconds);
    char grid[96], procs[64];
    snprintf(grid, sizeof grid, "%lldx%lldx%lld", s->n[0], s->n[1], s->n[2]);
    snprintf(procs, sizeof procs, "%dx%dx%d", s->dims[2], s->dims[1], s->dims[0]);
    const char *phases[] = {"write", "read"};
    for (int p = 0; p < 2; p++) {
        json_t j;
        app_json(&j, "s3d_io", path, name, phases[p], s->file_bytes, seconds[p]);
        json_int(&j, "atomic", atomic);
        json_str(&j, "grid", grid);
        json_str(&j, "proc_grid", procs);
        json_int(&j, "region_bytes", s->local[0] * 8);
        json_end(&j);
    }
    for (int a = 0; a < S3D_ARRAYS; a++) MPI_Type_free(&types[a]), free(wbufs[a]), free(rbufs[a]);
    method_free(&m);
}

/* One method without and with atomic mode (as asked; each its own pattern). */
static void run_method(const char *path, const void *ctx_s3d, const char *name, uint64_t file_id) {
    const s3d_t *s = ctx_s3d;
    for (int atomic = 0; atomic < 2; atomic++)
        if (list_has(s->atomic, atomic ? "on" : "off")) run_atomicity(path, s, name, atomic, file_id + (uint64_t)atomic);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    const char *path = NULL, *methods = APP_METHODS;
    s3d_t s = {{200, 200, 200}, {0}, {0}, {0}, {0}, {0}, 0, "off,on", 0};
    int keep = 0;
    static struct option opts[] = {{"path", 1, 0, 'p'}, {"methods", 1, 0, 'm'}, {"grid", 1, 0, 'g'},
                                   {"atomic", 1, 0, 'a'}, {"sync", 0, 0, 's'},  {"keep", 0, 0, 'k'},
                                   {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': path = optarg; break;
        case 'm': methods = optarg; break;
        case 'g':
            if (sscanf(optarg, "%lldx%lldx%lld", &s.n[0], &s.n[1], &s.n[2]) != 3) die("--grid wants NXxNYxNZ");
            break;
        case 'a': s.atomic = optarg; break;
        case 's': s.sync = 1; break;
        case 'k': keep = 1; break;
        default: die("unknown option");
        }
    }
    if (!path) die("--path is required");
    if (s.n[0] < 1 || s.n[1] < 1 || s.n[2] < 1 || s.n[0] * s.n[1] * s.n[2] * 11 > (1LL << 31) - 1)
        die("grid out of range (int counts)");
    if (!list_has(s.atomic, "off") && !list_has(s.atomic, "on")) die("--atomic wants off, on or off,on");
    s3d_init(&s);
    app_each_method(path, methods, 400, keep, run_method, &s);
    MPI_Finalize();
    return 0;
}
