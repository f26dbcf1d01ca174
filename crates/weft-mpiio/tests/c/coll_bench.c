/* Collective-method benchmark: times write_all and read_all of two
 * interleaved patterns under one weft_coll_method and prints one JSON line
 * per pattern (rank 0). Run by the ignored test `bench_collective_methods`
 * in tests/mpi_collective.rs.
 *
 * usage: coll_bench PREFIX METHOD [REPS]
 *   METHOD: two_phase (romio_cb_* = enable) | datatype | automatic
 * Patterns:
 *   ior_hard: each rank writes RECORDS records of 47,008 bytes, record i of
 *             rank r at file offset (i * nprocs + r) * 47008 (a vector view)
 *   strided8: each rank writes REGIONS 8-byte regions, region i of rank r
 *             at (i * nprocs + r) * 8
 * Each repetition: write_all, barrier, read_all (verified), with the time
 * of the slowest rank; the JSON holds the best and the median repetition. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC 47008
#define RECORDS 64
#define REGIONS 32768

static int rank, nprocs;

#define MPI_OK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; MPI_Error_string(rc_, s_, &l_); fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double slowest(double seconds) {
    double max = 0;
    MPI_Allreduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

static void run(const char *prefix, const char *method, const char *pattern, int block, int blocks, int reps) {
    char path[1024];
    snprintf(path, sizeof path, "%s.%s", prefix, pattern);
    MPI_Info info;
    MPI_Info_create(&info);
    if (strcmp(method, "datatype") == 0) {
        MPI_Info_set(info, "weft_coll_method", "datatype");
    } else {
        MPI_Info_set(info, "weft_coll_method", "two_phase");
        const char *cb = strcmp(method, "automatic") == 0 ? "automatic" : "enable";
        MPI_Info_set(info, "romio_cb_write", cb);
        MPI_Info_set(info, "romio_cb_read", cb);
    }
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    MPI_Datatype ft;
    MPI_Type_vector(blocks, block, block * nprocs, MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * block, MPI_BYTE, ft, "native", MPI_INFO_NULL));
    size_t bytes = (size_t)block * blocks;
    unsigned char *out = malloc(bytes), *in = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) out[i] = (unsigned char)(rank * 31 + i * 7);
    double *w = calloc(reps, sizeof *w), *r = calloc(reps, sizeof *r);
    for (int k = 0; k < reps; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_OK(MPI_File_write_at_all(fh, 0, out, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE));
        w[k] = slowest(MPI_Wtime() - t0);
        memset(in, 0, bytes);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_OK(MPI_File_read_at_all(fh, 0, in, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE));
        r[k] = slowest(MPI_Wtime() - t0);
        if (memcmp(in, out, bytes) != 0) {
            fprintf(stderr, "rank %d: %s read back differs\n", rank, pattern);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    qsort(w, reps, sizeof *w, compare);
    qsort(r, reps, sizeof *r, compare);
    double total = (double)bytes * nprocs;
    if (rank == 0)
        printf("{\"pattern\":\"%s\",\"method\":\"%s\",\"ranks\":%d,\"bytes\":%.0f,\"reps\":%d,"
               "\"write_best_s\":%.4f,\"write_median_s\":%.4f,\"read_best_s\":%.4f,\"read_median_s\":%.4f,"
               "\"write_MBps\":%.1f,\"read_MBps\":%.1f}\n",
               pattern, method, nprocs, total, reps, w[0], w[reps / 2], r[0], r[reps / 2], total / w[reps / 2] / 1e6,
               total / r[reps / 2] / 1e6);
    fflush(stdout);
    free(w); free(r); free(out); free(in);
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: coll_bench PREFIX METHOD [REPS]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps < 1) reps = 1;
    run(argv[1], argv[2], "ior_hard", REC, RECORDS, reps);
    run(argv[1], argv[2], "strided8", 8, REGIONS, reps);
    MPI_Finalize();
    return 0;
}
