/* MPI-IO on a plain path that lies on a Weft mount (issue 23 item 4).
 *
 *   mount_paths PATH [INTS]      (default 20000 ints per rank)
 *
 * All ranks open PATH (CREATE|RDWR), empty it, and write through a strided
 * view (vector file type: rank r owns every P-th block of 16 ints) with
 * MPI_File_write_all, then read it back with read_all and independently,
 * and check every int. Rank 0 then compares MPI_File_get_size with a
 * stat() of PATH through the kernel after MPI_File_close (the mount must
 * see the new size at once), and creates PATH.gone, closes it and
 * removes it with MPI_File_delete (access() must then say ENOENT).
 *
 * Prints "mount_paths OK requests=N" on rank 0, N being the Weft data
 * requests this process's client sent (weft_mpiio_data_requests, found
 * with dlsym; 0 when the library is absent or the file went through the
 * MPI library's own MPI-IO). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 16

static int rank, nprocs, failures = 0;

#define MPI_OK(call)                                                                           \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != MPI_SUCCESS) {                                                              \
            char s_[MPI_MAX_ERROR_STRING];                                                     \
            int l_;                                                                            \
            MPI_Error_string(rc_, s_, &l_);                                                    \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_);                    \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                      \
        }                                                                                      \
    } while (0)

static int value(long i) { return (rank << 24) ^ (int)(i * 2654435761u); }

static long long weft_requests(void) {
    int (*counter)(int64_t *, int64_t *) = (int (*)(int64_t *, int64_t *))dlsym(RTLD_DEFAULT, "weft_mpiio_data_requests");
    int64_t requests = 0, bytes = 0;
    if (counter) counter(&requests, &bytes);
    return (long long)requests;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: mount_paths PATH [INTS]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *path = argv[1];
    int count = argc > 2 ? atoi(argv[2]) : 20000;
    count -= count % BLOCK;
    int *data = malloc(sizeof(int) * count), *back = malloc(sizeof(int) * count);
    for (int i = 0; i < count; i++) data[i] = value(i);

    MPI_Datatype filetype;
    MPI_OK(MPI_Type_vector(count / BLOCK, BLOCK, BLOCK * nprocs, MPI_INT, &filetype));
    MPI_Datatype resized;
    MPI_OK(MPI_Type_create_resized(filetype, 0, (MPI_Aint)count * nprocs * sizeof(int), &resized));
    MPI_OK(MPI_Type_commit(&resized));

    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_size(fh, 0));
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * BLOCK * sizeof(int), MPI_INT, resized, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_write_all(fh, data, count, MPI_INT, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_sync(fh));
    for (int pass = 0; pass < 2; pass++) {
        MPI_Status status;
        int got = -1;
        memset(back, 0xA5, sizeof(int) * count);
        if (pass == 0) MPI_OK(MPI_File_read_at_all(fh, 0, back, count, MPI_INT, &status));
        else MPI_OK(MPI_File_read_at(fh, 0, back, count, MPI_INT, &status));
        MPI_Get_count(&status, MPI_INT, &got);
        if (got != count) fprintf(stderr, "rank %d: pass %d: count %d of %d\n", rank, pass, got, count), failures++;
        for (int i = 0; i < count; i++)
            if (back[i] != data[i]) {
                fprintf(stderr, "rank %d: pass %d: int %d is %d, expected %d\n", rank, pass, i, back[i], data[i]);
                failures++;
                break;
            }
    }
    MPI_Offset size = 0;
    MPI_OK(MPI_File_get_size(fh, &size));
    MPI_OK(MPI_File_close(&fh));
    MPI_Type_free(&resized);
    MPI_Type_free(&filetype);
    long long expected = (long long)count * nprocs * sizeof(int);
    if (size != expected) fprintf(stderr, "rank %d: size %lld, expected %lld\n", rank, (long long)size, expected), failures++;
    if (rank == 0) {
        struct stat st;
        if (stat(path, &st) != 0) perror("stat after close"), failures++;
        else if (st.st_size != expected)
            fprintf(stderr, "stat after close: %lld bytes, MPI-IO wrote %lld\n", (long long)st.st_size, expected), failures++;
    }

    /* MPI_File_delete on a path of the same directory. */
    char gone[4096];
    snprintf(gone, sizeof gone, "%s.gone", path);
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, gone, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_close(&fh));
    if (rank == 0) {
        MPI_OK(MPI_File_delete(gone, MPI_INFO_NULL));
        if (access(gone, F_OK) == 0 || errno != ENOENT) fprintf(stderr, "%s still there after MPI_File_delete\n", gone), failures++;
    }

    long long requests = weft_requests();
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf("mount_paths OK requests=%lld\n", requests);
    free(data), free(back);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
