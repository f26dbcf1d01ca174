/* File types of many blocks per rank (issue 24: HDF5's linked-chunk
 * collective I/O builds one struct entry per chunk; Weft once refused
 * types of more than 4,096 blocks).
 *
 *   bigtypes PREFIX [BLOCKS]      (default 20000 blocks per rank)
 *
 * The file is a sequence of 12-byte slots, slot k * P + r belonging to
 * rank r's block k (P ranks). Two files:
 *   PREFIX.hindexed  an hindexed file type of MPI_INT: block k holds
 *                    1 + k % 3 ints at the start of its slot;
 *   PREFIX.struct    a struct file type: block k is one MPI_INT (k even)
 *                    or one vector(2, 1, 2) of MPI_INT (k odd: the slot's
 *                    first and third int), so the children differ.
 * Each is written with MPI_File_write_all through the view and read back
 * with MPI_File_read_all and with independent MPI_File_read_at; every int
 * is checked. Rank 0 first fills the file with a background byte: ROMIO's
 * data sieving writes uninitialised buffer bytes into holes beyond the end
 * of file, so the holes must exist before the comparison. The Rust
 * test (tests/mpi.rs) compares the files with the MPI library's own.
 *
 * Prints "bigtypes OK" on rank 0 when every rank read back everything,
 * and per file a line "TIMING <suffix> blocks=B write_s=W read_s=R
 * ns_per_block_write=... ns_per_block_read=..." (slowest rank; set_view +
 * write_all, and read_at_all). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs, failures = 0;
static long blocks_per_rank = 0;

#define MPI_OK(call)                                                                           \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != MPI_SUCCESS) {                                                              \
            char s_[MPI_MAX_ERROR_STRING];                                                     \
            int l_;                                                                            \
            MPI_Error_string(rc_, s_, &l_);                                                    \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_);                    \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                      \
        }                                                                                      \
    } while (0)

/* The value of the i-th int this rank writes (in view order). */
static int value(long i) { return (rank << 24) | (int)(i & 0xFFFFFF); }

static void write_and_check(const char *prefix, const char *suffix, MPI_Datatype filetype, long file_bytes) {
    char path[1024];
    MPI_File fh;
    int size;
    MPI_OK(MPI_Type_size(filetype, &size));
    int count = size / (int)sizeof(int);
    int *data = malloc(sizeof(int) * count), *back = malloc(sizeof(int) * count);
    for (int i = 0; i < count; i++) data[i] = value(i);
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    if (rank == 0) {
        char *background = malloc(file_bytes);
        memset(background, 0xEE, file_bytes);
        MPI_OK(MPI_File_write_at(fh, 0, background, (int)file_bytes, MPI_BYTE, MPI_STATUS_IGNORE));
        free(background);
    }
    MPI_OK(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    double times[2], started = MPI_Wtime();
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, filetype, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_write_all(fh, data, count, MPI_INT, MPI_STATUS_IGNORE));
    times[0] = MPI_Wtime() - started;
    MPI_OK(MPI_File_sync(fh));
    for (int pass = 0; pass < 2; pass++) {
        MPI_Status status;
        int got = -1;
        memset(back, 0xA5, sizeof(int) * count);
        started = MPI_Wtime();
        if (pass == 0) MPI_OK(MPI_File_read_at_all(fh, 0, back, count, MPI_INT, &status));
        else MPI_OK(MPI_File_read_at(fh, 0, back, count, MPI_INT, &status));
        if (pass == 0) times[1] = MPI_Wtime() - started;
        MPI_Get_count(&status, MPI_INT, &got);
        if (got != count) fprintf(stderr, "rank %d: %s pass %d: count %d of %d\n", rank, suffix, pass, got, count), failures++;
        for (int i = 0; i < count; i++)
            if (back[i] != data[i]) {
                fprintf(stderr, "rank %d: %s pass %d: int %d is %d, expected %d\n", rank, suffix, pass, i, back[i], data[i]);
                failures++;
                break;
            }
    }
    MPI_OK(MPI_File_close(&fh));
    free(data), free(back);
    double slowest[2];
    MPI_Reduce(times, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("TIMING %s blocks=%ld write_s=%.3f read_s=%.3f ns_per_block_write=%.1f ns_per_block_read=%.1f\n", suffix,
               blocks_per_rank, slowest[0], slowest[1], slowest[0] * 1e9 / blocks_per_rank,
               slowest[1] * 1e9 / blocks_per_rank);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: bigtypes PREFIX [BLOCKS]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int blocks = argc > 2 ? atoi(argv[2]) : 20000;
    blocks_per_rank = blocks;
    int *lengths = malloc(sizeof(int) * blocks), *ones = malloc(sizeof(int) * blocks);
    MPI_Aint *displacements = malloc(sizeof(MPI_Aint) * blocks);
    MPI_Datatype *children = malloc(sizeof(MPI_Datatype) * blocks);
    MPI_Datatype pair, hindexed, structure;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &pair));
    for (int k = 0; k < blocks; k++) {
        lengths[k] = 1 + k % 3;
        ones[k] = 1;
        displacements[k] = ((MPI_Aint)k * nprocs + rank) * 12;
        children[k] = k % 2 ? pair : MPI_INT;
    }
    MPI_OK(MPI_Type_create_hindexed(blocks, lengths, displacements, MPI_INT, &hindexed));
    MPI_OK(MPI_Type_commit(&hindexed));
    MPI_OK(MPI_Type_create_struct(blocks, ones, displacements, children, &structure));
    MPI_OK(MPI_Type_commit(&structure));
    long file_bytes = (long)blocks * nprocs * 12;
    write_and_check(argv[1], "hindexed", hindexed, file_bytes);
    write_and_check(argv[1], "struct", structure, file_bytes);
    MPI_Type_free(&hindexed), MPI_Type_free(&structure), MPI_Type_free(&pair);
    free(lengths), free(ones), free(displacements), free(children);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf("bigtypes OK (%d blocks per rank, %d ranks)\n", blocks, nprocs);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
