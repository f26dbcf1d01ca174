/* Every MPI_File_* function not yet implemented for Weft files returns
 * MPI_ERR_UNSUPPORTED_OPERATION on a Weft handle (never reaching PMPI,
 * never crashing). The calls come from unsupported_calls.h, generated per
 * flavour from the library's exported symbols.
 * usage: unsupported WEFT_PATH */
#include <mpi.h>
#include <stdio.h>
#include "unsupported_calls.h"

static int rank, failures = 0;

static void check(const char *name, int rc) {
    int class = -1;
    MPI_Error_class(rc, &class);
    if (class != MPI_ERR_UNSUPPORTED_OPERATION) {
        fprintf(stderr, "rank %d: %s returned class %d\n", rank, name, class);
        failures++;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_File fh;
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    if (argc < 2 || MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int calls = weft_call_unsupported(fh, check);
    /* The handle still works afterwards. */
    int value = 42;
    if (MPI_File_write_at(fh, rank * 4, &value, 1, MPI_INT, MPI_STATUS_IGNORE) != MPI_SUCCESS) failures++;
    if (MPI_File_close(&fh) != MPI_SUCCESS) failures++;
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total == 0 ? "unsupported OK (%d calls)\n" : "unsupported FAILED (%d calls)\n", calls);
    MPI_Finalize();
    return total == 0 ? 0 : 1; /* 0 calls: every exported function is implemented */
}
