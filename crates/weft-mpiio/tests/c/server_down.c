/* A Weft data server dies under a running MPI job (run by
 * tests/mpi_server_down.rs).
 *
 *   server_down WIDE NARROW FLAGDIR
 *
 * WIDE is created striped over every server (hint striping_factor = 4,
 * striping_unit = STRIP), NARROW on one server (striping_factor = 1); every
 * rank writes its blocks of both, reads them back, and rank 0 creates
 * FLAGDIR/ready. The test then kills a server holding a datafile of WIDE
 * but neither file's metadata nor NARROW's data, and creates FLAGDIR/killed.
 * With MPI_ERRORS_RETURN on both files:
 * - read_at, write_at of the whole of WIDE (every server), collective
 *   write_at_all and read_at_all of each rank's block (again every server)
 *   and iread_at + MPI_Wait fail with MPI_ERR_IO on every rank, and return
 *   (no hang);
 * - NARROW still reads and writes correctly.
 * Rank 0 then creates FLAGDIR/checked; the test restarts the server and
 * creates FLAGDIR/restarted. I/O on WIDE works again (the first access may
 * still see the lost connection: up to 5 attempts), WIDE's bytes are intact,
 * a rewrite of WIDE reads back, both files close.
 * Prints "server_down OK" on rank 0. Waits for the flags are bounded
 * (120 s each). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define STRIP 65536
#define STRIPS_PER_RANK 4 /* a rank's block spans STRIPS_PER_RANK servers */
#define BLOCK (STRIP * STRIPS_PER_RANK)

static unsigned char value(long offset, int round) { return (unsigned char)((offset * 13 + round * 101 + 7) & 0xff); }

static void fill(unsigned char *buf, long offset, long len, int round) {
    for (long i = 0; i < len; i++) buf[i] = value(offset + i, round);
}

static long wrong(const unsigned char *buf, long offset, long len, int round) {
    long bad = 0;
    for (long i = 0; i < len; i++) bad += buf[i] != value(offset + i, round);
    return bad;
}

static MPI_File open_file(const char *path, const char *factor) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "striping_factor", factor);
    char unit[32];
    snprintf(unit, sizeof unit, "%d", STRIP);
    MPI_Info_set(info, "striping_unit", unit);
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: open %s failed (class %d)\n", rank, path, class_of(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    return fh;
}

/* Writes (write != 0) or reads and checks this rank's block of `fh` in `round`. */
static int own_block(MPI_File fh, int write, int round, unsigned char *buf) {
    MPI_Offset at = (MPI_Offset)rank * BLOCK;
    int rc;
    if (write) {
        fill(buf, at, BLOCK, round);
        rc = MPI_File_write_at(fh, at, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
    } else {
        memset(buf, 0, BLOCK);
        rc = MPI_File_read_at(fh, at, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS) CHECK(wrong(buf, at, BLOCK, round) == 0, "round %d: block read back wrong", round);
    }
    return rc;
}

static void wait_for(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int waited = 0;
    while (access(path, F_OK) != 0 && waited < 2400) { /* 120 s at most */
        usleep(50 * 1000);
        waited++;
    }
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "rank %d: the test never created %s\n", rank, path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void signal_test(const char *dir, const char *name) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *flag = fopen(path, "w");
        if (!flag) {
            fprintf(stderr, "cannot create %s\n", path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fclose(flag);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: server_down WIDE NARROW FLAGDIR\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *dir = argv[3];
    long whole = (long)BLOCK * nprocs;
    unsigned char *buf = malloc(BLOCK), *all = malloc(whole);

    MPI_File wide = open_file(argv[1], "4"), narrow = open_file(argv[2], "1");
    CHECK(own_block(wide, 1, 0, buf) == MPI_SUCCESS, "write wide");
    CHECK(own_block(narrow, 1, 0, buf) == MPI_SUCCESS, "write narrow");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(own_block(wide, 0, 0, buf) == MPI_SUCCESS, "read wide");
    CHECK(own_block(narrow, 0, 0, buf) == MPI_SUCCESS, "read narrow");
    signal_test(dir, "ready");
    wait_for(dir, "killed");

    /* Every access of WIDE touches the dead server: MPI_ERR_IO, at once. */
    expect_class(MPI_File_read_at(wide, 0, all, (int)whole, MPI_BYTE, MPI_STATUS_IGNORE), MPI_ERR_IO, "read_at of the whole file");
    fill(all, 0, whole, 1);
    expect_class(MPI_File_write_at(wide, 0, all, (int)whole, MPI_BYTE, MPI_STATUS_IGNORE), MPI_ERR_IO, "write_at of the whole file");
    fill(buf, (long)rank * BLOCK, BLOCK, 1);
    expect_class(MPI_File_write_at_all(wide, (MPI_Offset)rank * BLOCK, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), MPI_ERR_IO,
                    "write_at_all of each rank's block");
    expect_class(MPI_File_read_at_all(wide, (MPI_Offset)rank * BLOCK, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), MPI_ERR_IO,
                    "read_at_all of each rank's block");
    /* Nonblocking: the start succeeds or fails, the completion reports it. */
    MPI_Request request = MPI_REQUEST_NULL;
    int rc0 = MPI_File_iread_at(wide, 0, all, (int)whole, MPI_BYTE, &request);
    if (rc0 == MPI_SUCCESS) rc0 = MPI_Wait(&request, MPI_STATUS_IGNORE);
    expect_class(rc0, MPI_ERR_IO, "iread_at + MPI_Wait of the whole file");
    /* NARROW lives elsewhere: unaffected. */
    CHECK(own_block(narrow, 0, 0, buf) == MPI_SUCCESS, "read narrow with a server down");
    CHECK(own_block(narrow, 1, 2, buf) == MPI_SUCCESS, "write narrow with a server down");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(own_block(narrow, 0, 2, buf) == MPI_SUCCESS, "read narrow back with a server down");
    signal_test(dir, "checked");
    wait_for(dir, "restarted");

    /* Back: the first access may still meet the lost connection. */
    int rc = MPI_ERR_IO, attempts = 0;
    for (; attempts < 5 && rc != MPI_SUCCESS; attempts++) {
        memset(buf, 0, BLOCK);
        rc = MPI_File_read_at(wide, (MPI_Offset)rank * BLOCK, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) usleep(100 * 1000);
    }
    CHECK(rc == MPI_SUCCESS, "read wide after the restart: class %d after %d attempts", class_of(rc), attempts);
    /* The failed writes may have reached the live servers (round 1 bytes)
     * before failing on the dead one: each byte is round 0 or round 1. */
    if (rc == MPI_SUCCESS) {
        long bad = 0;
        for (long i = 0; i < BLOCK; i++) {
            long at = (long)rank * BLOCK + i;
            bad += buf[i] != value(at, 0) && buf[i] != value(at, 1);
        }
        CHECK(bad == 0, "wide after the restart: %ld bytes neither written value", bad);
    }
    CHECK(own_block(wide, 1, 3, buf) == MPI_SUCCESS, "rewrite wide after the restart");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(own_block(wide, 0, 3, buf) == MPI_SUCCESS, "read wide back after the restart");
    memset(all, 0, whole);
    CHECK(MPI_File_read_at_all(wide, 0, all, (int)whole, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS, "read_at_all of wide");
    CHECK(wrong(all, 0, whole, 3) == 0, "read_at_all of wide: wrong bytes");
    CHECK(MPI_File_close(&wide) == MPI_SUCCESS, "close wide");
    CHECK(MPI_File_close(&narrow) == MPI_SUCCESS, "close narrow");

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0) printf("server_down OK (%d ranks)\n", nprocs);
        else printf("server_down FAILED: %d checks\n", total);
    }
    free(buf), free(all);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
