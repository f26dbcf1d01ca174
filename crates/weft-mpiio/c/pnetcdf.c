/* PnetCDF entry points that take a file name, wrapped so that the POSIX
 * calls PnetCDF makes on a `weft:` name inside them reach Weft.
 *
 * PnetCDF 1.12.3 strips everything up to the first ':' of the name before
 * its POSIX probes (rank 0: access() and truncate() in ncmpi_create,
 * open() + read() of the format signature in ncmpi_open and
 * ncmpi_inq_file_format), so inside `ncmpi_open(comm, "weft:/a.nc", ...)`
 * it calls open("/a.nc"), a local name. Each wrapper opens a window for the
 * `weft:` name on the calling thread (c/posix.c serves the stripped name
 * from Weft while it is open) and calls PnetCDF's own function, found with
 * dlsym(RTLD_NEXT) on first use. Any other name passes straight through.
 * These symbols are only ever called in programs linked with PnetCDF; no
 * PnetCDF header is needed (MPI types come from the flavour's mpi.h). */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft_posix.h"

/* PnetCDF's definition of `name`; a program calling it is linked with PnetCDF. */
static void *weft_pnetcdf_next(void **slot, const char *name) {
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        if (!fn) {
            fprintf(stderr, "libweft_mpiio: %s called but not found after this library: %s\n", name, dlerror());
            abort();
        }
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

typedef int (*weft_nc_open_fn)(MPI_Comm, const char *, int, MPI_Info, int *);
typedef int (*weft_nc_format_fn)(const char *, int *);

/* ncmpi_create and ncmpi_open are the same wrapper around two names (a
 * review with `duplicates` pairs them): each interposed symbol is written
 * out, the window logic is in weft_posix_window_begin/end. */
int ncmpi_create(MPI_Comm comm, const char *path, int cmode, MPI_Info info, int *ncidp) {
    static void *slot;
    weft_nc_open_fn real = (weft_nc_open_fn)weft_pnetcdf_next(&slot, "ncmpi_create");
    const char *outer = NULL;
    int opened = weft_posix_window_begin(path, &outer);
    int rc = real(comm, path, cmode, info, ncidp);
    weft_posix_window_end(opened, outer);
    return rc;
}

int ncmpi_open(MPI_Comm comm, const char *path, int omode, MPI_Info info, int *ncidp) {
    static void *slot;
    weft_nc_open_fn real = (weft_nc_open_fn)weft_pnetcdf_next(&slot, "ncmpi_open");
    const char *outer = NULL;
    int opened = weft_posix_window_begin(path, &outer);
    int rc = real(comm, path, omode, info, ncidp);
    weft_posix_window_end(opened, outer);
    return rc;
}

int ncmpi_inq_file_format(const char *path, int *formatp) {
    static void *slot;
    weft_nc_format_fn real = (weft_nc_format_fn)weft_pnetcdf_next(&slot, "ncmpi_inq_file_format");
    const char *outer = NULL;
    int opened = weft_posix_window_begin(path, &outer);
    int rc = real(path, formatp);
    weft_posix_window_end(opened, outer);
    return rc;
}
