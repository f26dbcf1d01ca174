/* Shared by the HDF5 test programs (hdf5_rw.c, hdf5_serial.c): the rank
 * globals, a CHECK that aborts the job with HDF5's error stack, and the
 * property lists for the mpio driver and collective transfers. */
#ifndef WEFT_TEST_HDF5_COMMON_H
#define WEFT_TEST_HDF5_COMMON_H
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>

static int rank, nprocs;

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        if ((expr) < 0) {                                                                    \
            fprintf(stderr, "rank %d: %s:%d: %s failed\n", rank, __FILE__, __LINE__, #expr); \
            H5Eprint2(H5E_DEFAULT, stderr);                                                  \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                    \
        }                                                                                    \
    } while (0)

/* File access through the mpio driver on MPI_COMM_WORLD. */
static hid_t mpio_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(fapl);
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    return fapl;
}

/* Collective dataset transfers. */
static hid_t collective(void) {
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    CHECK(dxpl);
    CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
    return dxpl;
}
#endif
