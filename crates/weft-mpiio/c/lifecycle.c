/* When Weft's MPI-IO state ends: the clean-up at MPI_Finalize.
 *
 * Libraries close the files a program left open from a delete callback of
 * an attribute on MPI_COMM_SELF (HDF5 sets one when it initialises, after
 * MPI_Init); MPI runs those callbacks at the start of MPI_Finalize, still
 * fully working, in the reverse order of setting (MPI-2.2 and later). So
 * Weft's clean-up is such a callback too, set as early as possible: right
 * after PMPI_Init / PMPI_Init_thread (intercepted here), so that it runs
 * after every callback a user or library sets later, whose closes and last
 * writes on Weft files therefore still work. It completes pending Weft
 * requests, then syncs and closes every Weft file still open, newest first
 * (c/nonblocking.c, c/weft_mpiio.c); the closed handles are retired, never
 * freed, so a call on one afterwards gets MPI_ERR_FILE, not freed memory.
 *
 * If MPI was initialised without passing through these hooks (OpenMPI's
 * Fortran MPI_INIT calls PMPI_Init directly), the attribute is set at the
 * first Weft open instead; callbacks set before that open then run after
 * Weft's clean-up and find their Weft files closed (README).
 *
 * Nothing runs at load time; a program that never opens a Weft file pays
 * one keyval and one attribute. */
#include <mpi.h>
#include <pthread.h>
#include "weft_mpiio_internal.h"

static pthread_mutex_t weft_finalize_lock = PTHREAD_MUTEX_INITIALIZER;
static int weft_finalize_set = 0;

static int weft_finalize_callback(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm; (void)keyval; (void)value; (void)extra;
    weft_finalize_requests();
    weft_finalize_files();
    return weft_remote_finalize(); /* c/remote.c: ABT's buffered work and deferred errors */
}

void weft_finalize_register(void) {
    pthread_mutex_lock(&weft_finalize_lock);
    if (!weft_finalize_set) {
        int keyval = MPI_KEYVAL_INVALID;
        if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, weft_finalize_callback, &keyval, NULL) == MPI_SUCCESS &&
            PMPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL) == MPI_SUCCESS)
            weft_finalize_set = 1;
    }
    pthread_mutex_unlock(&weft_finalize_lock);
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) weft_finalize_register();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) weft_finalize_register();
    return rc;
}
