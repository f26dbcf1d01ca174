/* rfs:HOST:PORT:/path and discard:/path names (src/remote.rs, weft-rfs):
 * the hints that shape their layer chain, applied at open, and the
 * finalize step that waits for ABT's buffered work.
 *
 * The names themselves go through the same open, view, access and close
 * code as weft: names (weft_mpiio.c); only the data path differs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weft_mpiio.h"
#include "weft_mpiio_internal.h"

int weft_remote_is_name(const char *name) {
    return name && (strncmp(name, "rfs:", 4) == 0 || strncmp(name, "discard:", 8) == 0);
}

static const char *const weft_remote_hints[] = {
    "rfs_deferred_open", "abt", "abt_buffer_size", "abt_max_buffer_size",
    "abt_staging_dir", "abt_staging_fsync", "abt_deferred_close",
};

/* Passes the hints to the core, then builds the layers (a no-op for
 * weft: files). Returns an MPI error class. */
int weft_remote_open(weft_file *file, MPI_Info info) {
    char value[MPI_MAX_INFO_VAL + 1];
    if (info != MPI_INFO_NULL) {
        for (size_t k = 0; k < sizeof weft_remote_hints / sizeof weft_remote_hints[0]; k++) {
            int flag = 0;
            PMPI_Info_get(info, weft_remote_hints[k], MPI_MAX_INFO_VAL, value, &flag);
            if (flag) weft_mpiio_remote_hint(file->id, weft_remote_hints[k], value);
        }
    }
    return weft_mpi_class(weft_mpiio_remote_ready(file->id));
}

/* At finalize, after every file is closed: waits for ABT's queue; an
 * error of deferred work that no call returned is printed and returned. */
int weft_remote_finalize(void) {
    int rc = weft_mpi_class(weft_mpiio_remote_finalize());
    if (getenv("WEFT_ABT_STATS")) {
        int64_t stats[3] = {0, 0, 0};
        weft_mpiio_abt_stats(stats);
        fprintf(stderr, "libweft_mpiio: abt buffered_bytes=%lld staged_bytes=%lld drained_writes=%lld\n",
                (long long)stats[0], (long long)stats[1], (long long)stats[2]);
    }
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, text, &len);
        fprintf(stderr, "libweft_mpiio: deferred MPI-IO error at MPI_Finalize: %s\n", text);
    }
    return rc;
}
