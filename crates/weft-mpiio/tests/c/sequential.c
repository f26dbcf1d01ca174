/* MPI_MODE_SEQUENTIAL: shared-pointer access, views set with
 * MPI_DISPLACEMENT_CURRENT, and the errors for what a sequential file does
 * not allow. usage: sequential PATH   (weft:/x or a local path)
 *
 * Writes (opened CREATE|WRONLY|SEQUENTIAL): 4 ints per rank with
 * write_ordered; a view of ints at MPI_DISPLACEMENT_CURRENT (get_view
 * must report the byte position the shared pointer had); 2 ints per rank
 * with write_ordered; one int from rank 0 with iwrite_shared. Every
 * individual-pointer and explicit-offset call (blocking, nonblocking,
 * collective, split), seek and set_size answer
 * MPI_ERR_UNSUPPORTED_OPERATION, as under ROMIO (which allows
 * get_position, get_byte_offset and preallocate); on a file opened
 * without MPI_MODE_SEQUENTIAL, MPI_DISPLACEMENT_CURRENT is MPI_ERR_ARG.
 * Then reads it back (RDONLY|SEQUENTIAL) the same way, with
 * read_ordered, a view at MPI_DISPLACEMENT_CURRENT and iread_shared.
 * Prints "sequential OK". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static void expect_int(int got, int want, const char *what) {
    if (got != want) { fprintf(stderr, "rank %d: %s: %d, expected %d\n", rank, what, got, want); failures++; }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) { fprintf(stderr, "usage: sequential PATH\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    const char *path = argv[1];
    MPI_File fh;
    MPI_Request request;
    MPI_Status status;
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);

    int first[4], second[2], extra = 7777, unused[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) first[i] = rank * 100 + i;
    for (int i = 0; i < 2; i++) second[i] = 1000 + rank * 10 + i;
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL,
                               &fh), MPI_SUCCESS, "open sequential for writing");
    expect_class(MPI_File_write_ordered(fh, first, 4, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS, "write_ordered 1");
    expect_class(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL), MPI_SUCCESS,
                 "set_view at MPI_DISPLACEMENT_CURRENT");
    {
        MPI_Offset disp = -1;
        MPI_Datatype etype, filetype;
        char rep[MPI_MAX_DATAREP_STRING + 1];
        MPI_File_get_view(fh, &disp, &etype, &filetype, rep);
        expect_int((int)disp, 16 * nprocs, "view displacement after write_ordered");
    }
    expect_class(MPI_File_write_ordered(fh, second, 2, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS, "write_ordered 2");
    if (rank == 0) {
        expect_class(MPI_File_iwrite_shared(fh, &extra, 1, MPI_INT, &request), MPI_SUCCESS, "iwrite_shared");
        expect_class(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS, "wait iwrite_shared");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* What a sequential file does not allow. */
    const int no = MPI_ERR_UNSUPPORTED_OPERATION;
    expect_class(MPI_File_write_at(fh, 0, unused, 1, MPI_INT, MPI_STATUS_IGNORE), no, "write_at");
    expect_class(MPI_File_write(fh, unused, 1, MPI_INT, MPI_STATUS_IGNORE), no, "write");
    expect_class(MPI_File_write_all(fh, unused, 1, MPI_INT, MPI_STATUS_IGNORE), no, "write_all");
    expect_class(MPI_File_write_at_all(fh, 0, unused, 1, MPI_INT, MPI_STATUS_IGNORE), no, "write_at_all");
    expect_class(MPI_File_iwrite(fh, unused, 1, MPI_INT, &request), no, "iwrite");
    expect_class(MPI_File_iwrite_at(fh, 0, unused, 1, MPI_INT, &request), no, "iwrite_at");
    expect_class(MPI_File_write_all_begin(fh, unused, 1, MPI_INT), no, "write_all_begin");
    expect_class(MPI_File_seek(fh, 0, MPI_SEEK_SET), no, "seek");
    expect_class(MPI_File_set_size(fh, 0), no, "set_size");
    expect_class(MPI_File_close(&fh), MPI_SUCCESS, "close");

    /* MPI_DISPLACEMENT_CURRENT needs MPI_MODE_SEQUENTIAL. */
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh), MPI_SUCCESS, "open");
    expect_class(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL), MPI_ERR_ARG,
                 "MPI_DISPLACEMENT_CURRENT without MPI_MODE_SEQUENTIAL");
    MPI_File_close(&fh);

    /* Read it back sequentially. */
    int got[4] = {0}, got2[2] = {0}, got_extra = 0;
    expect_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh),
                 MPI_SUCCESS, "open sequential for reading");
    expect_class(MPI_File_read_ordered(fh, got, 4, MPI_INT, &status), MPI_SUCCESS, "read_ordered 1");
    for (int i = 0; i < 4; i++) expect_int(got[i], first[i], "read_ordered 1 data");
    expect_class(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL), MPI_SUCCESS,
                 "set_view at MPI_DISPLACEMENT_CURRENT (read)");
    expect_class(MPI_File_read_ordered(fh, got2, 2, MPI_INT, &status), MPI_SUCCESS, "read_ordered 2");
    for (int i = 0; i < 2; i++) expect_int(got2[i], second[i], "read_ordered 2 data");
    if (rank == 0) {
        expect_class(MPI_File_iread_shared(fh, &got_extra, 1, MPI_INT, &request), MPI_SUCCESS, "iread_shared");
        expect_class(MPI_Wait(&request, &status), MPI_SUCCESS, "wait iread_shared");
        expect_int(got_extra, extra, "iread_shared data");
    }
    expect_class(MPI_File_read_at(fh, 0, got, 1, MPI_INT, MPI_STATUS_IGNORE), no, "read_at");
    expect_class(MPI_File_iread(fh, got, 1, MPI_INT, &request), no, "iread");
    expect_class(MPI_File_read_all(fh, got, 1, MPI_INT, MPI_STATUS_IGNORE), no, "read_all");
    expect_class(MPI_File_close(&fh), MPI_SUCCESS, "close read");

    return finish("sequential");
}
