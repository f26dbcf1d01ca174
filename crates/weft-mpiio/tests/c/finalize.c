/* Files used from an MPI_COMM_SELF attribute delete callback, which MPI
 * runs inside MPI_Finalize (how HDF5 and other libraries close the files a
 * program left open).
 *
 *   finalize PREFIX
 *
 * After MPI_Init the program opens PREFIX.cb and PREFIX.open on
 * MPI_COMM_WORLD, writes the first half of every rank's block of each
 * (write_at), and sets its own attribute on MPI_COMM_SELF. Its delete
 * callback, run inside MPI_Finalize, writes the second halves (write_at_all
 * on .cb, a nonblocking iwrite_at on .open that nobody waits for), closes
 * .cb and leaves .open open (the MPI-IO layer must close it after the
 * callback). A rank's block is BLOCK_INTS ints: rank r's block starts at
 * int r * BLOCK_INTS and holds the ints r * BLOCK_INTS, r * BLOCK_INTS + 1,
 * ..., so each complete file is the ints 0, 1, 2, ... (checked by the Rust
 * test; tests/mpi_nonblocking.rs).
 *
 * Prints "finalize OK" on rank 0 after MPI_Finalize returned, if every call
 * in the callback succeeded and the callback ran exactly once. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_INTS (64 * 1024)
#define HALF_INTS (BLOCK_INTS / 2)

static int rank, failures = 0, callbacks = 0;
static MPI_File cb_file, open_file;
static int block[BLOCK_INTS];

#define MPI_OK(call)                                                                           \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != MPI_SUCCESS) {                                                              \
            char s_[MPI_MAX_ERROR_STRING];                                                     \
            int l_;                                                                            \
            MPI_Error_string(rc_, s_, &l_);                                                    \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_);                    \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static MPI_Offset second_half(void) { return ((MPI_Offset)rank * BLOCK_INTS + HALF_INTS) * (MPI_Offset)sizeof(int); }

static int finalize_callback(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm; (void)keyval; (void)value; (void)extra;
    static MPI_Request pending;
    callbacks++;
    MPI_OK(MPI_File_write_at_all(cb_file, second_half(), block + HALF_INTS, HALF_INTS, MPI_INT, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_close(&cb_file));
    if (cb_file != MPI_FILE_NULL) fprintf(stderr, "rank %d: close left the handle set\n", rank), failures++;
    MPI_OK(MPI_File_iwrite_at(open_file, second_half(), block + HALF_INTS, HALF_INTS, MPI_INT, &pending));
    return MPI_SUCCESS;
}

static void open_and_half_write(const char *prefix, const char *suffix, MPI_File *fh) {
    char path[1024];
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, fh));
    MPI_OK(MPI_File_write_at(*fh, (MPI_Offset)rank * BLOCK_INTS * sizeof(int), block, HALF_INTS, MPI_INT,
                             MPI_STATUS_IGNORE));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: finalize PREFIX\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < BLOCK_INTS; i++) block[i] = rank * BLOCK_INTS + i;
    open_and_half_write(argv[1], "cb", &cb_file);
    open_and_half_write(argv[1], "open", &open_file);
    int keyval;
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_callback, &keyval, NULL));
    MPI_OK(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL));
    MPI_Finalize();
    if (callbacks != 1) fprintf(stderr, "rank %d: callback ran %d times\n", rank, callbacks), failures++;
    if (failures == 0 && rank == 0) printf("finalize OK\n");
    return failures == 0 ? 0 : 1;
}
