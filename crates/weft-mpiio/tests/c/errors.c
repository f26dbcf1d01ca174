/* Error classes through MPI_ERRORS_RETURN on weft: paths.
 * usage: errors WEFT_PREFIX   (e.g. weft:/errors) */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[1024];
    MPI_File fh;
    int buf[4] = {1, 2, 3, 4};
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);

    snprintf(path, sizeof path, "%s.missing", argv[1]);
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_ERR_NO_SUCH_FILE, "open missing");
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh), MPI_ERR_AMODE, "bad amode");

    snprintf(path, sizeof path, "%s.ro", argv[1]);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_close(&fh);
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
                 MPI_ERR_FILE_EXISTS, "exclusive create of an existing file");
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_SUCCESS, "open read-only");
    int amode = 0;
    MPI_File_get_amode(fh, &amode);
    if (amode != MPI_MODE_RDONLY) { fprintf(stderr, "amode %d\n", amode); failures++; }
    expect_class(MPI_File_write_at(fh, 0, buf, 4, MPI_INT, MPI_STATUS_IGNORE), MPI_ERR_READ_ONLY, "write read-only");
    /* nonblocking: a start error is returned at once, a read completes */
    MPI_Request request;
    expect_class(MPI_File_iwrite_at(fh, 0, buf, 4, MPI_INT, &request), MPI_ERR_READ_ONLY, "iwrite_at read-only");
    expect_class(MPI_File_iread_at(fh, 0, buf, 4, MPI_INT, &request), MPI_SUCCESS, "iread_at");
    expect_class(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS, "wait iread_at");
    expect_class(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no_such_datarep", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_DATAREP, "datarep");
    MPI_Datatype bad;
    MPI_Type_contiguous(3, MPI_CHAR, &bad);
    MPI_Type_commit(&bad);
    expect_class(MPI_File_set_view(fh, 0, MPI_INT, bad, "native", MPI_INFO_NULL), MPI_ERR_ARG, "filetype not made of etypes");
    MPI_Type_free(&bad);
    /* Fortran handles: c2f/f2c round trip to the same Weft file, stable
     * across calls, and the handle works through it. */
    MPI_Fint fint = MPI_File_c2f(fh);
    if (fint == 0 || MPI_File_c2f(fh) != fint || MPI_File_f2c(fint) != fh) {
        fprintf(stderr, "rank %d: c2f/f2c round trip failed (%d)\n", rank, (int)fint);
        failures++;
    }
#if MPI_VERSION >= 4
    MPI_Count extent_c = -1;
    expect_class(MPI_File_get_type_extent_c(fh, MPI_INT, &extent_c), MPI_SUCCESS, "get_type_extent_c");
    if (extent_c != (MPI_Count)sizeof(int)) { fprintf(stderr, "get_type_extent_c %lld\n", (long long)extent_c); failures++; }
#endif
    MPI_Aint extent = -1;
    expect_class(MPI_File_get_type_extent(fh, MPI_DOUBLE, &extent), MPI_SUCCESS, "get_type_extent");
    if (extent != (MPI_Aint)sizeof(double)) { fprintf(stderr, "get_type_extent %ld\n", (long)extent); failures++; }
    MPI_Offset fsize = -1;
    expect_class(MPI_File_get_size(MPI_File_f2c(fint), &fsize), MPI_SUCCESS, "get_size through f2c");
    if (MPI_File_f2c(MPI_File_c2f(MPI_FILE_NULL)) != MPI_FILE_NULL) { fprintf(stderr, "f2c(c2f(NULL))\n"); failures++; }
    expect_class(MPI_File_close(&fh), MPI_SUCCESS, "close");
    if (MPI_File_f2c(fint) != MPI_FILE_NULL) { fprintf(stderr, "rank %d: f2c of a closed file\n", rank); failures++; }

    /* delete-on-close removes the file; MPI_File_delete of a missing file fails */
    snprintf(path, sizeof path, "%s.doc", argv[1]);
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh),
                 MPI_SUCCESS, "open delete-on-close");
    expect_class(MPI_File_write_at(fh, rank * 16, buf, 4, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS, "write");
    expect_class(MPI_File_close(&fh), MPI_SUCCESS, "close delete-on-close");
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_ERR_NO_SUCH_FILE, "deleted on close");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s.ro", argv[1]);
        expect_class(MPI_File_delete(path, MPI_INFO_NULL), MPI_SUCCESS, "delete");
        expect_class(MPI_File_delete(path, MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE, "delete again");
        /* A Rust panic stops at the boundary and becomes MPI_ERR_INTERN. */
        int (*panic_class)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "weft_mpiio_panic_class");
        if (!panic_class) { fprintf(stderr, "weft_mpiio_panic_class not found\n"); failures++; }
        else expect_class(panic_class(), MPI_ERR_INTERN, "panic at the boundary");
    }
    /* append mode starts the pointer at end of file */
    snprintf(path, sizeof path, "%s.append", argv[1]);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (rank == 0) MPI_File_write_at(fh, 0, buf, 4, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL, &fh);
    MPI_Offset position = -1;
    MPI_File_get_position(fh, &position);
    if (position != 16) { fprintf(stderr, "rank %d: append position %lld\n", rank, (long long)position); failures++; }
    MPI_File_close(&fh);

    /* striping hints at create (checked by the Rust test through the client) */
    snprintf(path, sizeof path, "%s.striped", argv[1]);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "striping_factor", "2");
    MPI_Info_set(info, "striping_unit", "4096");
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh), MPI_SUCCESS, "open striped");
    MPI_Info_free(&info);
    expect_class(MPI_File_write_at(fh, rank * 16, buf, 4, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS, "write striped");
    expect_class(MPI_File_close(&fh), MPI_SUCCESS, "close striped");

    return finish("errors");
}
