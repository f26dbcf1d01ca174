/* Writes and reads back files through several views; run on a weft: path
 * and on a local path (ROMIO), the Rust test compares the files' bytes.
 * usage: views PREFIX   (writes PREFIX.vec, .resized, .sub_c, .sub_f, .all, .darray, .sub3) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKGROUND_BYTES 2048

static int rank, nprocs, failures = 0;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define MPI_OK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; int l_; MPI_Error_string(rc_, s_, &l_); fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, s_); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static MPI_File open_new(const char *prefix, const char *suffix) {
    char path[1024];
    MPI_File fh;
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    /* A background pattern first: ROMIO's data sieving writes whatever its
     * buffer held into holes beyond end of file, so holes are not compared. */
    if (rank == 0) {
        unsigned char pattern[BACKGROUND_BYTES];
        for (int i = 0; i < BACKGROUND_BYTES; i++) pattern[i] = (unsigned char)(i * 7 + 1);
        MPI_OK(MPI_File_write_at(fh, 0, pattern, BACKGROUND_BYTES, MPI_BYTE, MPI_STATUS_IGNORE));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return fh;
}

static void fill(int *data, int n) { for (int i = 0; i < n; i++) data[i] = rank * 1000 + i + 1; }

static void expect_count(MPI_Status *status, MPI_Datatype type, int expected, const char *what) {
    int count = -1;
    MPI_Get_count(status, type, &count);
    CHECK(count == expected, "%s: MPI_Get_count %d, expected %d", what, count, expected);
}

/* vector with holes, independent writes with the individual pointer */
static void scenario_vec(const char *prefix) {
    MPI_File fh = open_new(prefix, "vec");
    MPI_Datatype v, ft;
    MPI_Type_vector(4, 2, 2 * nprocs + 1, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, (MPI_Aint)4 * (2 * nprocs + 1) * sizeof(int), &ft);
    MPI_Type_free(&v);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * 2 * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
    int out[16], in[16];
    MPI_Status st;
    fill(out, 16);
    MPI_OK(MPI_File_write(fh, out, 8, MPI_INT, &st));
    expect_count(&st, MPI_INT, 8, "vec write");
    MPI_OK(MPI_File_write(fh, out + 8, 8, MPI_INT, &st));
    MPI_Offset pos;
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == 16, "vec position %lld", (long long)pos);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    memset(in, 0, sizeof in);
    MPI_OK(MPI_File_read(fh, in, 16, MPI_INT, &st));
    expect_count(&st, MPI_INT, 16, "vec read");
    CHECK(memcmp(in, out, sizeof in) == 0, "vec read back differs");
    MPI_Offset byte;
    MPI_OK(MPI_File_get_byte_offset(fh, 3, &byte));
    CHECK(byte == (MPI_Offset)(rank * 2 + 2 * nprocs + 1 + 1) * 4, "vec byte offset %lld", (long long)byte);
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* resized file type (holes between tiles), explicit offsets, read past EOF */
static void scenario_resized(const char *prefix) {
    MPI_File fh = open_new(prefix, "resized");
    MPI_Datatype c3, ft;
    MPI_Type_contiguous(3, MPI_INT, &c3);
    MPI_Type_create_resized(c3, 0, (MPI_Aint)(3 * nprocs + 2) * sizeof(int), &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * 3 * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
    int out[9], in[12];
    MPI_Status st;
    fill(out, 9);
    MPI_OK(MPI_File_write_at(fh, 0, out, 9, MPI_INT, &st));
    /* sync-barrier-sync: the size below counts the other ranks' writes,
     * which MPI guarantees only so (write-behind layers such as ABT on
     * rfs: names, tests/mpi_rfs.rs, deliver them later otherwise). */
    MPI_OK(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_OK(MPI_File_sync(fh));
    memset(in, 0, sizeof in);
    MPI_OK(MPI_File_read_at(fh, 0, in, 9, MPI_INT, &st));
    expect_count(&st, MPI_INT, 9, "resized read");
    CHECK(memcmp(in, out, sizeof out) == 0, "resized read back differs");
    MPI_Offset size;
    MPI_OK(MPI_File_get_size(fh, &size));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_read_at(fh, size - 4, in, 3, MPI_INT, &st));
    expect_count(&st, MPI_BYTE, 4, "resized read across EOF");
    MPI_OK(MPI_File_read_at(fh, size + 8, in, 3, MPI_INT, &st));
    expect_count(&st, MPI_INT, 0, "resized read past EOF");
    MPI_Type_free(&ft);
    MPI_Type_free(&c3);
    MPI_OK(MPI_File_close(&fh));
}

/* 2-D subarray, C or Fortran order, collective write and read */
static void scenario_subarray(const char *prefix, int order) {
    MPI_File fh = open_new(prefix, order == MPI_ORDER_C ? "sub_c" : "sub_f");
    int sizes[2] = {6, 3 * nprocs}, subsizes[2] = {6, 3}, starts[2] = {0, 3 * rank};
    if (order == MPI_ORDER_FORTRAN) { sizes[0] = 5; subsizes[0] = 2; starts[0] = 1; }
    MPI_Datatype ft;
    MPI_Type_create_subarray(2, sizes, subsizes, starts, order, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, 16, MPI_INT, ft, "native", MPI_INFO_NULL));
    int n = subsizes[0] * subsizes[1], out[18], in[18];
    MPI_Status st;
    fill(out, n);
    MPI_OK(MPI_File_write_all(fh, out, n, MPI_INT, &st));
    expect_count(&st, MPI_INT, n, "subarray write_all");
    MPI_OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    memset(in, 0, sizeof in);
    MPI_OK(MPI_File_read_all(fh, in, n, MPI_INT, &st));
    CHECK(memcmp(in, out, n * sizeof(int)) == 0, "subarray read back differs");
    MPI_Offset disp;
    MPI_Datatype et, ft2;
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_OK(MPI_File_get_view(fh, &disp, &et, &ft2, rep));
    CHECK(disp == 16 && et == MPI_INT && strcmp(rep, "native") == 0, "get_view");
    MPI_Type_free(&ft2);
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

/* interleaved collective writes with a noncontiguous memory type */
static void scenario_all(const char *prefix) {
    MPI_File fh = open_new(prefix, "all");
    MPI_Datatype v, ft, mt;
    MPI_Type_vector(5, 1, nprocs, MPI_DOUBLE, &v);
    MPI_Type_create_resized(v, 0, (MPI_Aint)5 * nprocs * sizeof(double), &ft);
    MPI_Type_free(&v);
    MPI_Type_commit(&ft);
    MPI_Type_vector(5, 1, 2, MPI_DOUBLE, &v);
    MPI_Type_create_resized(v, 0, 10 * sizeof(double), &mt);
    MPI_Type_free(&v);
    MPI_Type_commit(&mt);
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)rank * sizeof(double), MPI_DOUBLE, ft, "native", MPI_INFO_NULL));
    double out[20], in[20];
    for (int i = 0; i < 20; i++) out[i] = rank * 100 + i + 0.5;
    MPI_Status st;
    MPI_OK(MPI_File_write_at_all(fh, 0, out, 2, mt, &st));
    expect_count(&st, mt, 2, "all write_at_all");
    MPI_OK(MPI_File_write_at_all(fh, 10, out + 1, 1, mt, &st));
    for (int i = 0; i < 20; i++) in[i] = -1;
    MPI_OK(MPI_File_read_at_all(fh, 0, in, 2, mt, &st));
    for (int i = 0; i < 20; i += 2)
        CHECK(in[i] == out[i], "all read back differs at %d", i);
    for (int i = 1; i < 20; i += 2)
        CHECK(in[i] == -1, "all read wrote a memory hole at %d", i);
    MPI_Offset size;
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size > 0, "all size");
    MPI_Type_free(&ft);
    MPI_Type_free(&mt);
    MPI_OK(MPI_File_close(&fh));
}

/* darray (block x cyclic, Fortran order) and a 3-D subarray (C order) */
static void scenario_arrays(const char *prefix) {
    MPI_File fh = open_new(prefix, "darray");
    int dims[2] = {0, 0}, gsizes[2] = {6, 8};
    int distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 1};
    MPI_Dims_create(nprocs, 2, dims);
    MPI_Datatype ft;
    MPI_Type_create_darray(nprocs, rank, 2, gsizes, distribs, dargs, dims, MPI_ORDER_FORTRAN, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    int size, out[48], in[48];
    MPI_Type_size(ft, &size);
    int n = size / (int)sizeof(int);
    fill(out, n);
    MPI_Status st;
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_write_all(fh, out, n, MPI_INT, &st));
    MPI_OK(MPI_File_read_at_all(fh, 0, in, n, MPI_INT, &st));
    expect_count(&st, MPI_INT, n, "darray read");
    CHECK(memcmp(in, out, n * sizeof(int)) == 0, "darray read back differs");
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));

    fh = open_new(prefix, "sub3");
    int sizes[3] = {nprocs, 3, 4}, subsizes[3] = {1, 2, 3}, starts[3] = {rank, 1, 0};
    MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    MPI_OK(MPI_File_set_view(fh, 8, MPI_INT, ft, "native", MPI_INFO_NULL));
    fill(out, 6);
    MPI_OK(MPI_File_write_at_all(fh, 0, out, 6, MPI_INT, &st));
    MPI_OK(MPI_File_read_at_all(fh, 0, in, 6, MPI_INT, &st));
    CHECK(memcmp(in, out, 6 * sizeof(int)) == 0, "sub3 read back differs");
    MPI_Type_free(&ft);
    MPI_OK(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) MPI_Abort(MPI_COMM_WORLD, 2);
    scenario_vec(argv[1]);
    scenario_resized(argv[1]);
    scenario_subarray(argv[1], MPI_ORDER_C);
    scenario_subarray(argv[1], MPI_ORDER_FORTRAN);
    scenario_all(argv[1]);
    scenario_arrays(argv[1]);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total == 0 ? "views OK\n" : "views FAILED (%d)\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
