/* The 3-D Jacobi snapshot program of Lee et al. (RFS/ABT, section 5),
 * scaled to this machine (issue 13's benchmark).
 *
 * usage: jacobi NAME BLOCK ITERATIONS SWEEPS
 *   Each rank holds BLOCK^3 doubles, (BLOCK,BLOCK,BLOCK)-distributed over
 *   the grid MPI_Dims_create gives; every iteration runs SWEEPS Jacobi
 *   sweeps (the compute phase: each cell becomes the mean of its six
 *   neighbours in the previous array; no halo exchange, as only the
 *   compute time matters here), then writes a snapshot collectively to
 *   NAME.<iteration> in row-major order of the global array
 *   (MPI_File_open, set_view with a subarray, write_all, close: these
 *   calls are the visible I/O time). Hints come from ROMIO_HINTS.
 * Rank 0 prints one JSON object: ranks, grid, bytes per snapshot, the
 * per-iteration compute and I/O seconds (slowest rank), and the visible
 * write bandwidth (all bytes / all I/O seconds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs;

#define MPI_OK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; MPI_Error_string(rc_, s_, &l_); fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: jacobi NAME BLOCK ITERATIONS SWEEPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *name = argv[1];
    int block = atoi(argv[2]), iterations = atoi(argv[3]), sweeps = atoi(argv[4]);
    if (block < 3 || iterations < 1 || iterations > 64 || sweeps < 0) MPI_Abort(MPI_COMM_WORLD, 2);
    int dims[3] = {0, 0, 0}, periods[3] = {0, 0, 0}, coords[3];
    MPI_Dims_create(nprocs, 3, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, rank, 3, coords);
    size_t cells = (size_t)block * block * block;
    double *a = malloc(cells * sizeof *a), *b = malloc(cells * sizeof *b);
    if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < cells; i++) a[i] = (double)((i * 7 + (size_t)rank * 13) % 101);
    int sizes[3], subsizes[3] = {block, block, block}, starts[3];
    for (int d = 0; d < 3; d++) { sizes[d] = dims[d] * block; starts[d] = coords[d] * block; }
    MPI_Datatype filetype;
    MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &filetype);
    MPI_Type_commit(&filetype);
    double compute[64], io[64];
#define AT(x, y, z) ((size_t)(x) * block * block + (size_t)(y) * block + (size_t)(z))
    for (int it = 0; it < iterations; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int s = 0; s < sweeps; s++) {
            for (int x = 1; x < block - 1; x++)
                for (int y = 1; y < block - 1; y++)
                    for (int z = 1; z < block - 1; z++)
                        b[AT(x, y, z)] = (a[AT(x - 1, y, z)] + a[AT(x + 1, y, z)] + a[AT(x, y - 1, z)] +
                                          a[AT(x, y + 1, z)] + a[AT(x, y, z - 1)] + a[AT(x, y, z + 1)]) / 6.0;
            double *t = a; a = b; b = t;
        }
        double t1 = MPI_Wtime();
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", name, it);
        MPI_File fh;
        MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
        MPI_OK(MPI_File_set_view(fh, 0, MPI_DOUBLE, filetype, "native", MPI_INFO_NULL));
        MPI_OK(MPI_File_write_all(fh, a, (int)cells, MPI_DOUBLE, MPI_STATUS_IGNORE));
        MPI_OK(MPI_File_close(&fh));
        double t2 = MPI_Wtime();
        double mine[2] = {t1 - t0, t2 - t1}, slowest[2];
        MPI_Reduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        compute[it] = slowest[0];
        io[it] = slowest[1];
    }
    double finalize_start = MPI_Wtime();
    if (rank == 0) {
        double bytes = (double)cells * sizeof(double) * nprocs, io_total = 0, compute_total = 0;
        printf("{\"ranks\": %d, \"grid\": [%d, %d, %d], \"block\": %d, \"snapshot_bytes\": %.0f, \"iterations\": %d, "
               "\"sweeps\": %d, \"compute_s\": [", nprocs, dims[0], dims[1], dims[2], block, bytes, iterations, sweeps);
        for (int i = 0; i < iterations; i++) { printf("%s%.6f", i ? ", " : "", compute[i]); compute_total += compute[i]; }
        printf("], \"io_s\": [");
        for (int i = 0; i < iterations; i++) { printf("%s%.6f", i ? ", " : "", io[i]); io_total += io[i]; }
        printf("], \"compute_total_s\": %.6f, \"io_total_s\": %.6f, \"visible_mib_s\": %.3f}\n", compute_total, io_total,
               bytes * iterations / io_total / 1048576.0);
        fflush(stdout);
    }
    free(a);
    free(b);
    MPI_Type_free(&filetype);
    MPI_Comm_free(&cart);
    (void)finalize_start;
    MPI_Finalize();
    return 0;
}
