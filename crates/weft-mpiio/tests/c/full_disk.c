/* A full disk under an MPI job (run by tests/mpi_full_disk.rs).
 *
 *   full_disk FILE AFTER
 *
 * With MPI_ERRORS_RETURN, every rank writes 1 MiB blocks of FILE
 * (interleaved: block k of rank r at (k * nprocs + r) MiB) with
 * MPI_File_write_at until one fails: its error class must be
 * MPI_ERR_NO_SPACE. Every block a rank got acknowledged reads back. A
 * collective MPI_File_write_at_all of one more block per rank fails with
 * MPI_ERR_NO_SPACE on every rank too. FILE closes, rank 0 deletes it
 * (MPI_File_delete on the full disk), and then AFTER is written with
 * 8 MiB per rank and read back: the deleted file's space comes back (the
 * removal is reclaimed in the background: a write answered NO_SPACE is
 * retried, at most 100 times 100 ms apart).
 * Prints "full_disk OK blocks=N" on rank 0 (N: blocks acknowledged in all). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define BLOCK (1 << 20)
#define BLOCKS_MAX 4096

static unsigned char byte_at(MPI_Offset offset) {
    return (unsigned char)((offset * 2654435761u) >> 7);
}

static void fill(unsigned char *buf, MPI_Offset offset) {
    for (int i = 0; i < BLOCK; i++) buf[i] = byte_at(offset + i);
}

static int matches(const unsigned char *buf, MPI_Offset offset) {
    for (int i = 0; i < BLOCK; i++)
        if (buf[i] != byte_at(offset + i)) return 0;
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: full_disk FILE AFTER\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char *buf = malloc(BLOCK), *back = malloc(BLOCK);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_SUCCESS, "open %s", argv[1]);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);

    long done = 0;
    rc = MPI_SUCCESS;
    for (; done < BLOCKS_MAX; done++) {
        MPI_Offset offset = ((MPI_Offset)done * nprocs + rank) * BLOCK;
        fill(buf, offset);
        MPI_Status status;
        rc = MPI_File_write_at(fh, offset, buf, BLOCK, MPI_BYTE, &status);
        if (rc != MPI_SUCCESS) break;
    }
    CHECK(rc != MPI_SUCCESS, "the disk never filled (%ld blocks)", done);
    expect_class(rc, MPI_ERR_NO_SPACE, "MPI_File_write_at");
    for (long k = 0; k < done; k++) {
        MPI_Offset offset = ((MPI_Offset)k * nprocs + rank) * BLOCK;
        MPI_Status status;
        memset(back, 0, BLOCK);
        rc = MPI_File_read_at(fh, offset, back, BLOCK, MPI_BYTE, &status);
        CHECK(rc == MPI_SUCCESS && matches(back, offset), "acknowledged block %ld reads back", k);
    }
    /* Everybody is at the end: a collective write of one more block each. */
    long most = 0;
    MPI_Allreduce(&done, &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Offset offset = ((MPI_Offset)(most + 1) * nprocs + rank) * BLOCK;
    fill(buf, offset);
    rc = MPI_File_write_at_all(fh, offset, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
    expect_class(rc, MPI_ERR_NO_SPACE, "MPI_File_write_at_all");
    rc = MPI_File_close(&fh);
    CHECK(rc == MPI_SUCCESS, "close on a full disk");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK(MPI_File_delete(argv[1], MPI_INFO_NULL) == MPI_SUCCESS, "delete on a full disk");
    MPI_Barrier(MPI_COMM_WORLD);

    rc = MPI_File_open(MPI_COMM_WORLD, argv[2], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_SUCCESS, "open %s after the delete", argv[2]);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    int retries = 0;
    for (int k = 0; k < 8; k++) {
        MPI_Offset at = ((MPI_Offset)k * nprocs + rank) * BLOCK;
        fill(buf, at);
        for (;;) {
            rc = MPI_File_write_at(fh, at, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS || class_of(rc) != MPI_ERR_NO_SPACE || retries >= 100) break;
            retries++;
            usleep(100000);
        }
        CHECK(rc == MPI_SUCCESS, "block %d after the delete (%d retries)", k, retries);
    }
    for (int k = 0; k < 8; k++) {
        MPI_Offset at = ((MPI_Offset)k * nprocs + rank) * BLOCK;
        memset(back, 0, BLOCK);
        rc = MPI_File_read_at(fh, at, back, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
        CHECK(rc == MPI_SUCCESS && matches(back, at), "block %d after the delete reads back", k);
    }
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close %s", argv[2]);

    long total = 0;
    int all_failures = 0;
    MPI_Reduce(&done, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && all_failures == 0) printf("full_disk OK blocks=%ld\n", total);
    free(buf);
    free(back);
    MPI_Finalize();
    return all_failures == 0 ? 0 : 1;
}
