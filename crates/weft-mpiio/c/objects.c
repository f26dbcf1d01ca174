/* The collective half of the object cache (src/object_cache.rs): the
 * weft_cache / weft_cache_bytes hints, and at the end of each set_view the
 * exchange of every rank's compact view description, from which each rank
 * builds the same objects. */
#include <stdlib.h>
#include <string.h>

#include "weft_mpiio.h"
#include "weft_mpiio_internal.h"
#include "weft_objects.h"

/* Largest view description a rank sends (src/objects.rs: at most
 * TILE_REGIONS_MAX pairs of varints, plus a header). */
#define WEFT_OBJECTS_BLOB_MAX ((size_t)1 << 20)

/* weft_cache = objects | off; weft_cache_bytes = a positive byte count.
 * Other values are ignored, as ROMIO ignores hints it does not know. */
void weft_apply_cache_hints(weft_file *file, MPI_Info info) {
    char value[32];
    int flag = 0, cache = -1;
    long long budget = -1;
    if (info == MPI_INFO_NULL) return;
    PMPI_Info_get(info, "weft_cache", (int)sizeof value - 1, value, &flag);
    if (flag && strcmp(value, "objects") == 0) cache = 1;
    else if (flag && strcmp(value, "off") == 0) cache = 0;
    flag = 0;
    PMPI_Info_get(info, "weft_cache_bytes", (int)sizeof value - 1, value, &flag);
    if (flag) {
        char *end = NULL;
        long long bytes = strtoll(value, &end, 10);
        if (end != value && *end == '\0' && bytes > 0) budget = bytes;
    }
    weft_mpiio_set_cache_hints(file->id, cache, (int64_t)budget);
}

/* Collective; replaces set_view's closing barrier. Objects are built only
 * if every rank asks for them and set its view (`ok`); otherwise no rank
 * has any (all bytes count as shared). The cache is on only if every rank
 * asked for it, so collective calls take the same path everywhere.
 * Returns an MPI class. */
int weft_objects_exchange(weft_file *file, int ok) {
    /* [0]: objects wanted, [1]: the cache wanted; on every rank or not. */
    int want[2] = {ok == MPI_SUCCESS && weft_mpiio_objects_wanted(file->id), weft_mpiio_cache_wanted(file->id)};
    int agreed[2] = {0, 0};
    PMPI_Allreduce(want, agreed, 2, MPI_INT, MPI_MIN, file->comm);
    int all = agreed[0];
    if (!all) return weft_mpi_class(weft_mpiio_objects_forget(file->id));
    int nprocs;
    PMPI_Comm_size(file->comm, &nprocs);
    uint8_t *mine = malloc(WEFT_OBJECTS_BLOB_MAX);
    int64_t *lens = malloc((size_t)nprocs * sizeof *lens);
    int *counts = malloc((size_t)nprocs * sizeof *counts), *displs = malloc((size_t)nprocs * sizeof *displs);
    size_t len = 0;
    /* A rank that cannot describe its view sends nothing: the empty blob
     * fails to decode everywhere, so no rank builds objects. */
    if (!mine || weft_mpiio_objects_describe(file->id, mine, WEFT_OBJECTS_BLOB_MAX, &len) != 0) len = 0;
    int64_t mylen = (int64_t)len;
    int rc = MPI_SUCCESS;
    if (!lens || !counts || !displs) rc = MPI_ERR_INTERN;
    int failed = rc != MPI_SUCCESS, any_failed = 0;
    PMPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, file->comm);
    if (any_failed) {
        free(mine); free(lens); free(counts); free(displs);
        return rc;
    }
    PMPI_Allgather(&mylen, 1, MPI_INT64_T, lens, 1, MPI_INT64_T, file->comm);
    size_t total = 0;
    for (int p = 0; p < nprocs; p++) {
        counts[p] = (int)lens[p];
        displs[p] = (int)total;
        total += (size_t)lens[p];
    }
    uint8_t *every = malloc(total ? total : 1);
    int have = every != NULL, all_have = 0;
    PMPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, file->comm);
    if (all_have) {
        PMPI_Allgatherv(mine, (int)len, MPI_BYTE, every, counts, displs, MPI_BYTE, file->comm);
        rc = weft_mpi_class(weft_mpiio_objects_install(file->id, file->rank, nprocs, every, lens, agreed[1]));
    } else {
        rc = MPI_ERR_INTERN;
    }
    free(every); free(mine); free(lens); free(counts); free(displs);
    return rc;
}

/* Not MPI: tests reach the cache's state (dlsym)
 * through this exported helper (objects, coarse, write-backs). */
int weft_mpiio_file_cache_summary(MPI_File fh, long long *objects, int *coarse, long long *flushes) {
    weft_file *file = weft_find(fh);
    int64_t o = -1, f = 0;
    *coarse = 0;
    if (!file) return MPI_ERR_FILE;
    int rc = weft_mpi_class(weft_mpiio_cache_summary(file->id, &o, coarse, &f));
    *objects = o;
    *flushes = f;
    return rc;
}
