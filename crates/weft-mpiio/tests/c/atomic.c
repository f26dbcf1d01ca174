/* Atomic mode on a Weft file (run by tests/mpi_shared.rs).
 *
 * usage: atomic PATH MODE ROUNDS [ATOMIC_METHOD LOCK_METHOD LOCK_PROTOCOL]
 *        MODE = atomic | plain; the optional three are the values of the
 *        weft_atomic_method, weft_lock_method, weft_lock_protocol hints.
 * Rank 0 rewrites a noncontiguous view (a vector with holes, striped over
 * every server in 4 KiB strips) ROUNDS times, each time with one value in
 * every int (1, 2, 3 …); the other ranks read the same view ROUNDS times
 * meanwhile. A read that holds two different values saw a write half done.
 * atomic: set_atomicity(1) first; prints "atomic OK mixed=0" or fails.
 * plain:  default mode; prints "plain mixed=N" (informative: a mix is
 *         possible but not guaranteed to happen). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 64
#define BLOCK_INTS 64  /* 256 bytes */
#define STRIDE_INTS 128 /* holes of 256 bytes; 64 blocks span 32 KiB = 8 strips */

static int rank, size;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            MPI_Abort(MPI_COMM_WORLD, 1);                                  \
        }                                                                  \
    } while (0)

#define MPI_OK(call)                                                       \
    do {                                                                   \
        int rc_ = (call);                                                  \
        if (rc_ != MPI_SUCCESS) {                                          \
            char text_[MPI_MAX_ERROR_STRING];                              \
            int len_ = 0;                                                  \
            MPI_Error_string(rc_, text_, &len_);                           \
            CHECK(0, "%s: %s", #call, text_);                              \
        }                                                                  \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 4 || argc == 7, "usage: atomic PATH atomic|plain ROUNDS [ATOMIC_METHOD LOCK_METHOD LOCK_PROTOCOL]");
    int atomic = strcmp(argv[2], "atomic") == 0;
    int rounds = atoi(argv[3]);
    CHECK(rounds > 0 && rounds <= 100000, "bad ROUNDS");

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "striping_factor", "4");
    MPI_Info_set(info, "striping_unit", "4096");
    if (argc == 7) {
        MPI_Info_set(info, "weft_atomic_method", argv[4]);
        MPI_Info_set(info, "weft_lock_method", argv[5]);
        MPI_Info_set(info, "weft_lock_protocol", argv[6]);
    }
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);

    int flag = -1;
    MPI_OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0, "default atomicity %d", flag);
    if (atomic) {
        MPI_OK(MPI_File_set_atomicity(fh, 1));
        MPI_OK(MPI_File_get_atomicity(fh, &flag));
        CHECK(flag == 1, "atomicity after set_atomicity(1): %d", flag);
    }

    MPI_Datatype view;
    MPI_Type_vector(BLOCKS, BLOCK_INTS, STRIDE_INTS, MPI_INT, &view);
    MPI_Type_commit(&view);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, view, "native", MPI_INFO_NULL));
    int n = BLOCKS * BLOCK_INTS;
    int *buf = malloc(n * sizeof *buf);
    CHECK(buf != NULL, "malloc");

    if (rank == 0) {
        for (int i = 0; i < n; i++) buf[i] = 0;
        MPI_OK(MPI_File_write_at(fh, 0, buf, n, MPI_INT, MPI_STATUS_IGNORE));
    }
    MPI_Barrier(MPI_COMM_WORLD);

    long long mixed = 0, reads = 0;
    int last_seen = 0;
    for (int round = 1; round <= rounds; round++) {
        if (rank == 0) {
            for (int i = 0; i < n; i++) buf[i] = round;
            MPI_OK(MPI_File_write_at(fh, 0, buf, n, MPI_INT, MPI_STATUS_IGNORE));
        } else {
            MPI_Status status;
            int count = -1;
            MPI_OK(MPI_File_read_at(fh, 0, buf, n, MPI_INT, &status));
            MPI_Get_count(&status, MPI_INT, &count);
            CHECK(count == n, "read %d ints", count);
            reads++;
            int first = buf[0], differs = 0;
            for (int i = 1; i < n; i++) differs |= buf[i] != first;
            mixed += differs;
            CHECK(first >= 0 && first <= rounds, "value %d out of range", first);
            /* Sequential consistency: one reader never sees time go back. */
            if (atomic) CHECK(differs || first >= last_seen, "saw %d after %d", first, last_seen);
            if (!differs) last_seen = first;
        }
    }
    long long all_mixed = 0, all_reads = 0;
    MPI_Reduce(&mixed, &all_mixed, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&reads, &all_reads, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    /* The final state: every int holds the last round's value. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_OK(MPI_File_read_at(fh, 0, buf, n, MPI_INT, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(buf[i] == rounds, "final [%d] = %d", i, buf[i]);
    if (atomic) MPI_OK(MPI_File_set_atomicity(fh, 0));
    MPI_OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0, "atomicity after set_atomicity(0): %d", flag);
    MPI_OK(MPI_File_close(&fh));
    if (rank == 0) {
        if (atomic) {
            CHECK(all_mixed == 0, "%lld of %lld reads mixed two writes in atomic mode", all_mixed, all_reads);
            printf("atomic OK mixed=0 reads=%lld\n", all_reads);
        } else {
            printf("plain mixed=%lld reads=%lld\n", all_mixed, all_reads);
        }
    }
    free(buf);
    MPI_Type_free(&view);
    MPI_Finalize();
    return 0;
}
