/* Erroneous views are refused, unusual legal ones work.
 * usage: bad_views PATH   (weft:/x, or a local path for the MPI's own MPI-IO:
 * MPICH 4.0's ROMIO agrees with every expectation; OpenMPI 4.1's MPI-IO
 * answers MPI_ERR_TYPE instead, and ROMIO 3.2.1 accepts a negative
 * displacement)
 *
 * MPI_File_set_view with a file type or an etype whose typemap has
 * negative, decreasing or overlapping displacements must fail with
 * MPI_ERR_IO (as ROMIO answers); the view in place stays usable. Legal but
 * unusual views: a resized file type with lb > 0, a zero-size file type
 * with holes (only empty accesses through it), a file type whose blocks
 * touch (adjacent, not overlapping). Data written through the legal views
 * is read back through them (and, for the adjacent blocks, through a byte
 * view, compared with what the typemap says). Prints "bad_views OK" on success. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static MPI_Datatype hindexed_ints(int n, const int *blocklens, const MPI_Aint *displs) {
    MPI_Datatype t;
    MPI_Type_create_hindexed(n, blocklens, displs, MPI_INT, &t);
    MPI_Type_commit(&t);
    return t;
}

/* Writes `n` ints (value base + i) through filetype `ft` at displacement
 * `disp`, then reads the file's bytes [0, span) through a byte view and
 * checks that the ints sit at `expect_at[i]` (byte offsets). */
static void roundtrip(MPI_File fh, MPI_Offset disp, MPI_Datatype ft, int n, const long *expect_at, long span,
                      const char *what) {
    int data[16], check[16];
    for (int i = 0; i < n; i++) data[i] = 1000 * (rank + 1) + i;
    expect_class(MPI_File_set_view(fh, disp, MPI_INT, ft, "native", MPI_INFO_NULL), MPI_SUCCESS, what);
    if (rank == 0) expect_class(MPI_File_write_at(fh, 0, data, n, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS, what);
    MPI_Barrier(MPI_COMM_WORLD);
    /* read back through the same view */
    memset(check, 0, sizeof check);
    expect_class(MPI_File_read_at_all(fh, 0, check, n, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS, what);
    for (int i = 0; i < n; i++)
        if (check[i] != 1000 + i) { fprintf(stderr, "rank %d: %s: view read [%d] = %d\n", rank, what, i, check[i]); failures++; break; }
    /* and as raw bytes */
    if (!expect_at) { MPI_Barrier(MPI_COMM_WORLD); return; }
    char *raw = calloc((size_t)span, 1);
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    MPI_File_read_at_all(fh, 0, raw, (int)span, MPI_BYTE, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) {
        int v;
        memcpy(&v, raw + expect_at[i], sizeof v);
        if (v != 1000 + i) { fprintf(stderr, "rank %d: %s: int %d not at byte %ld (%d)\n", rank, what, i, expect_at[i], v); failures++; break; }
    }
    free(raw);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) { fprintf(stderr, "usage: bad_views PATH\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    MPI_File fh;
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    if (rank == 0) MPI_File_delete(argv[1], MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    expect_class(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), MPI_SUCCESS,
                 "open");

    /* Erroneous file types. */
    int two[2] = {1, 1}, len2[2] = {2, 1};
    MPI_Aint negative[2] = {-8, 16}, decreasing[2] = {16, 0}, overlapping[2] = {0, 4};
    struct { const char *what; MPI_Datatype type; } bad[4];
    bad[0].what = "negative displacement";
    bad[0].type = hindexed_ints(2, two, negative);
    bad[1].what = "decreasing displacements";
    bad[1].type = hindexed_ints(2, two, decreasing);
    bad[2].what = "overlapping blocks";
    bad[2].type = hindexed_ints(2, len2, overlapping);
    {
        /* a struct whose second block starts inside the first */
        int bl[2] = {2, 1};
        MPI_Aint d[2] = {0, 4};
        MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
        MPI_Type_create_struct(2, bl, d, ts, &bad[3].type);
        MPI_Type_commit(&bad[3].type);
        bad[3].what = "struct with overlapping members";
    }
    for (int k = 0; k < 4; k++) {
        char what[128];
        snprintf(what, sizeof what, "filetype: %s", bad[k].what);
        expect_class(MPI_File_set_view(fh, 0, MPI_INT, bad[k].type, "native", MPI_INFO_NULL), MPI_ERR_IO, what);
    }
    /* Erroneous etypes (the file type is the etype itself), each on a
     * handle of its own, kept until the end: after refusing an etype,
     * MPICH's ROMIO fails on the handle's next set_view. */
    MPI_Datatype bad_etypes[2];
    MPI_File etype_fh[2];
    {
        int bl[2] = {1, 1};
        MPI_Aint d[2][2] = {{4, 0}, {0, 2}};
        const char *what[2] = {"etype: decreasing", "etype: overlapping"};
        for (int k = 0; k < 2; k++) {
            MPI_Type_create_hindexed(2, bl, d[k], MPI_INT, &bad_etypes[k]);
            MPI_Type_commit(&bad_etypes[k]);
            MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR, MPI_INFO_NULL, &etype_fh[k]);
            expect_class(MPI_File_set_view(etype_fh[k], 0, bad_etypes[k], bad_etypes[k], "native", MPI_INFO_NULL),
                         MPI_ERR_IO, what[k]);
        }
    }
    for (int k = 0; k < 4; k++) MPI_Type_free(&bad[k].type);

    /* Legal, unusual: resized with lb > 0 (two ints at bytes 8 and 12 of
     * each 32-byte tile whose lb is 4). Checked through the view only:
     * where the tiles lie is compared with ROMIO's files by views.c. */
    {
        int bl[1] = {2};
        MPI_Aint d[1] = {8};
        MPI_Datatype inner, ft;
        MPI_Type_create_hindexed(1, bl, d, MPI_INT, &inner);
        MPI_Type_create_resized(inner, 4, 32, &ft);
        MPI_Type_commit(&ft);
        roundtrip(fh, 100, ft, 6, NULL, 0, "resized, lb > 0");
        MPI_Type_free(&inner);
        MPI_Type_free(&ft);
    }
    /* Legal: adjacent blocks (touching, not overlapping), given out of
     * coalesced form. */
    {
        int bl[3] = {1, 1, 1};
        MPI_Aint d[3] = {0, 4, 12};
        MPI_Datatype ft = hindexed_ints(3, bl, d), tiled;
        MPI_Type_create_resized(ft, 0, 20, &tiled);
        MPI_Type_commit(&tiled);
        long at[6] = {0, 4, 12, 20, 24, 32};
        roundtrip(fh, 0, tiled, 6, at, 64, "adjacent blocks");
        MPI_Type_free(&ft);
        MPI_Type_free(&tiled);
    }
    /* Legal: a zero-size file type with holes; only empty accesses. */
    {
        MPI_Datatype empty, ft;
        MPI_Type_contiguous(0, MPI_INT, &empty);
        MPI_Type_create_resized(empty, 0, 64, &ft);
        MPI_Type_commit(&ft);
        expect_class(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL), MPI_SUCCESS, "zero-size filetype");
        int none = 0;
        expect_class(MPI_File_write_at_all(fh, 0, &none, 0, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS,
                     "empty write through a zero-size filetype");
        MPI_Type_free(&empty);
        MPI_Type_free(&ft);
    }
    MPI_File_close(&fh);
    for (int k = 0; k < 2; k++) {
        MPI_File_close(&etype_fh[k]);
        MPI_Type_free(&bad_etypes[k]);
    }
    return finish("bad_views");
}
