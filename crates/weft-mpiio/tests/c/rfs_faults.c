/* Faults of remote MPI-IO (rfs: names, tests/mpi_rfs.rs).
 *
 * usage: rfs_faults MODE NAME [FLAGDIR]
 *   refused:  MPI_File_open(NAME) must fail with MPI_ERR_ACCESS on every
 *             rank (the client has no key).
 *   deferred: with ABT (hints from ROMIO_HINTS), each rank writes 2 MiB in
 *             64 KiB pieces, each write returning at once; the gateway's
 *             disk is smaller, so MPI_File_sync must then return
 *             MPI_ERR_NO_SPACE (the deferred error), and a later write too.
 *             (A write after the background thread met the error already
 *             returns it: MPI_ERR_NO_SPACE, and the loop stops.)
 *   killed:   collective writes of 64 KiB per rank in a loop; after the
 *             first, rank 0 creates FLAGDIR/ready and the test kills the
 *             gateway; every rank must then get an MPI error (bounded: at
 *             most 3000 rounds of 10 ms).
 * Prints "rfs_faults OK" from rank 0 when every rank saw what it should. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIECE (64 * 1024)

static int rank, nprocs;

static int error_class(int rc) {
    int class = rc;
    MPI_Error_class(rc, &class);
    return class;
}

static const char *class_name(int class) {
    static char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(class, text, &len);
    return text;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 3) {
        fprintf(stderr, "usage: rfs_faults MODE NAME [FLAGDIR]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1], *name = argv[2];
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    int ok = 1;
    static char piece[PIECE];
    memset(piece, 'a' + rank, sizeof piece);
    MPI_File fh = MPI_FILE_NULL;
    if (strcmp(mode, "refused") == 0) {
        int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        if (error_class(rc) != MPI_ERR_ACCESS) {
            fprintf(stderr, "rank %d: open without the key gave %s, not MPI_ERR_ACCESS\n", rank, class_name(rc));
            ok = 0;
        }
    } else if (strcmp(mode, "deferred") == 0) {
        int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: open: %s\n", rank, class_name(rc));
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
        for (int i = 0; i < 32; i++) {
            MPI_Offset at = ((MPI_Offset)i * nprocs + rank) * PIECE;
            rc = MPI_File_write_at(fh, at, piece, PIECE, MPI_BYTE, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                /* The background thread already met the full disk: the
                 * deferred error surfaces at this next call. */
                if (error_class(rc) != MPI_ERR_NO_SPACE) {
                    fprintf(stderr, "rank %d: buffered write %d gave %s\n", rank, i, class_name(rc));
                    ok = 0;
                }
                break;
            }
        }
        rc = MPI_File_sync(fh);
        if (error_class(rc) != MPI_ERR_NO_SPACE) {
            fprintf(stderr, "rank %d: sync after a full disk gave %s, not MPI_ERR_NO_SPACE\n", rank, class_name(rc));
            ok = 0;
        }
        rc = MPI_File_write_at(fh, 0, piece, 1, MPI_BYTE, MPI_STATUS_IGNORE);
        if (error_class(rc) != MPI_ERR_NO_SPACE) {
            fprintf(stderr, "rank %d: write after the deferred error gave %s\n", rank, class_name(rc));
            ok = 0;
        }
        MPI_File_close(&fh);
    } else if (strcmp(mode, "killed") == 0 && argc > 3) {
        int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: open: %s\n", rank, class_name(rc));
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
        /* Every rank stops in the same round (the collective calls must
         * match); a rank whose last collective write still went through
         * then writes once more on its own, which must fail. */
        int failed = 0, any = 0, round = 0;
        for (; round < 3000 && !any; round++) {
            MPI_Offset at = ((MPI_Offset)round * nprocs + rank) * PIECE;
            rc = MPI_File_write_at_all(fh, at, piece, PIECE, MPI_BYTE, MPI_STATUS_IGNORE);
            failed = rc != MPI_SUCCESS;
            if (failed && round == 0) {
                fprintf(stderr, "rank %d: the first write failed before the gateway was killed\n", rank);
                ok = 0;
            }
            if (round == 0 && rank == 0) {
                char flag[4096];
                snprintf(flag, sizeof flag, "%s/ready", argv[3]);
                FILE *f = fopen(flag, "w");
                if (f) fclose(f);
            }
            MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (!any) usleep(10000);
        }
        if (!failed) rc = MPI_File_write_at(fh, 0, piece, PIECE, MPI_BYTE, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS) {
            fprintf(stderr, "rank %d: no error after %d rounds\n", rank, round);
            ok = 0;
        } else {
            printf("rank %d: error after the gateway died: %s\n", rank, class_name(error_class(rc)));
            fflush(stdout);
        }
        MPI_File_close(&fh);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0 && all) printf("rfs_faults OK\n");
    MPI_Finalize();
    return all ? 0 : 1;
}
