/* The shared file pointer after its metadata server restarted (run by
 * tests/mpi_shared.rs).
 *
 * usage: restart PATH FLAGDIR
 * Writes one record with write_shared, creates FLAGDIR/ready (rank 0) and
 * waits (at most 120 s) for FLAGDIR/restarted, which the test creates
 * after killing and restarting the file's metadata server. The session
 * holding the pointer is gone with it: write_shared must now fail, and
 * settle on MPI_ERR_BAD_FILE (ESTALE). Closing still works; after a
 * reopen the shared pointer works again. Prints "restart OK". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int rank;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            MPI_Abort(MPI_COMM_WORLD, 1);                                  \
        }                                                                  \
    } while (0)

static MPI_File open_file(const char *path) {
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_SUCCESS, "open failed (%d)", rc);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    return fh;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(argc == 3, "usage: restart PATH FLAGDIR");
    char ready[1024], restarted[1024];
    snprintf(ready, sizeof ready, "%s/ready", argv[2]);
    snprintf(restarted, sizeof restarted, "%s/restarted", argv[2]);

    MPI_File fh = open_file(argv[1]);
    int value = rank;
    CHECK(MPI_File_write_shared(fh, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS, "first write_shared");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        FILE *flag = fopen(ready, "w");
        CHECK(flag != NULL, "create %s", ready);
        fclose(flag);
    }
    int waited = 0;
    while (access(restarted, F_OK) != 0 && waited < 2400) { /* 120 s at most */
        usleep(50 * 1000);
        waited++;
    }
    CHECK(access(restarted, F_OK) == 0, "the test never restarted the server");

    /* The first call may see the broken connection (MPI_ERR_IO); the
     * session itself is gone, which is MPI_ERR_BAD_FILE. */
    int class = MPI_SUCCESS, attempts = 0;
    for (; attempts < 5 && class != MPI_ERR_BAD_FILE; attempts++) {
        int rc = MPI_File_write_shared(fh, &value, 1, MPI_INT, MPI_STATUS_IGNORE);
        CHECK(rc != MPI_SUCCESS, "write_shared succeeded without its session");
        MPI_Error_class(rc, &class);
    }
    CHECK(class == MPI_ERR_BAD_FILE, "write_shared after the restart: class %d, not MPI_ERR_BAD_FILE", class);
    MPI_Offset position = -1;
    CHECK(MPI_File_get_position_shared(fh, &position) != MPI_SUCCESS, "get_position_shared without its session");
    /* Independent I/O is unaffected; close works. */
    CHECK(MPI_File_write_at(fh, 64 + rank * 4, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS, "write_at");
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");

    /* A new open has a new session: the shared pointer works again. */
    fh = open_file(argv[1]);
    CHECK(MPI_File_write_shared(fh, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS, "write_shared after reopen");
    MPI_Barrier(MPI_COMM_WORLD);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(MPI_File_get_position_shared(fh, &position) == MPI_SUCCESS && position == size * (MPI_Offset)sizeof(int),
          "shared position after reopen %lld", (long long)position);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close after reopen");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("restart OK\n");
    MPI_Finalize();
    return 0;
}
