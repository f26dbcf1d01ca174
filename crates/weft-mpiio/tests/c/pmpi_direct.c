/* Like ROMIO's psimple: every file call is a PMPI_File_* call (as tools and
 * profiling layers make them). Each rank writes its block through a strided
 * view with PMPI_File_write_all, the file is reopened and read back with
 * PMPI_File_read_all; PMPI_File_c2f/f2c round-trip the handle, and
 * PMPI_File_get_info/get_size/delete are used. Run on a weft: name and on a
 * local name, the Rust test compares the files' bytes.
 * usage: pmpi_direct PATH   (writes PATH, and PATH.del which it deletes) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 64  /* ints per rank per round */
#define ROUNDS 8

static int rank, nprocs, failures;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define OK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; PMPI_Error_string(rc_, s_, &l_); fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_); PMPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

int main(int argc, char **argv) {
    PMPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) { fprintf(stderr, "usage: pmpi_direct PATH\n"); PMPI_Abort(MPI_COMM_WORLD, 1); }
    const char *path = argv[1];
    MPI_Datatype block, filetype;
    PMPI_Type_contiguous(BLOCK, MPI_INT, &block);
    PMPI_Type_create_resized(block, 0, (MPI_Aint)nprocs * BLOCK * sizeof(int), &filetype);
    PMPI_Type_commit(&filetype);
    int *out = malloc(sizeof(int) * BLOCK * ROUNDS), *in = malloc(sizeof(int) * BLOCK * ROUNDS);
    for (int i = 0; i < BLOCK * ROUNDS; i++) out[i] = rank * 100000 + i;

    MPI_File fh;
    OK(PMPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    /* The Fortran handle of the file stands for the same file. */
    MPI_Fint ffh = PMPI_File_c2f(fh);
    CHECK(PMPI_File_f2c(ffh) == fh, "f2c(c2f(fh)) is not fh");
    OK(PMPI_File_set_view(fh, (MPI_Offset)rank * BLOCK * sizeof(int), MPI_INT, filetype, "native", MPI_INFO_NULL));
    MPI_Status status;
    OK(PMPI_File_write_all(fh, out, BLOCK * ROUNDS, MPI_INT, &status));
    int count = -1;
    PMPI_Get_count(&status, MPI_INT, &count);
    CHECK(count == BLOCK * ROUNDS, "write_all count %d", count);
    MPI_Info info;
    OK(PMPI_File_get_info(fh, &info));
    int nkeys = -1;
    PMPI_Info_get_nkeys(info, &nkeys);
    if (rank == 0) printf("hints %d\n", nkeys); /* OpenMPI's own ompio reports none */
    for (int k = 0; rank == 0 && k < nkeys; k++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        PMPI_Info_get_nthkey(info, k, key);
        PMPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag);
        if (flag) printf("hint %s=%s\n", key, value);
    }
    PMPI_Info_free(&info);
    OK(PMPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL, "close did not set MPI_FILE_NULL");

    OK(PMPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    MPI_Offset size = -1;
    OK(PMPI_File_get_size(fh, &size));
    CHECK(size == (MPI_Offset)nprocs * BLOCK * ROUNDS * sizeof(int), "size %lld", (long long)size);
    OK(PMPI_File_set_view(fh, (MPI_Offset)rank * BLOCK * sizeof(int), MPI_INT, filetype, "native", MPI_INFO_NULL));
    memset(in, 0, sizeof(int) * BLOCK * ROUNDS);
    OK(PMPI_File_read_all(fh, in, BLOCK * ROUNDS, MPI_INT, &status));
    CHECK(memcmp(in, out, sizeof(int) * BLOCK * ROUNDS) == 0, "read_all: wrong bytes");
    OK(PMPI_File_close(&fh));

    /* Create, then delete through PMPI; a CREATE|EXCL open then succeeds. */
    char other[4096];
    snprintf(other, sizeof other, "%s.del", path);
    OK(PMPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    OK(PMPI_File_close(&fh));
    PMPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) OK(PMPI_File_delete(other, MPI_INFO_NULL));
    PMPI_Barrier(MPI_COMM_WORLD);
    OK(PMPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh));
    OK(PMPI_File_close(&fh));

    PMPI_Type_free(&filetype);
    PMPI_Type_free(&block);
    free(out);
    free(in);
    int total = 0;
    PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf("pmpi_direct OK\n");
    PMPI_Finalize();
    return total != 0;
}
