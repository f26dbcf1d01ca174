/* One HDF5 file, serial and parallel in turn (issue 24): HDF5 programs
 * create or reopen a file on rank 0 with the default sec2 driver (plain
 * POSIX open/pwrite/close) and open it in parallel with the mpio driver.
 *
 *   hdf5_serial PATH
 *
 * 1. rank 0, serial (sec2): H5Fcreate(PATH, H5F_ACC_TRUNC); writes
 *    /serial (int32 [SERIAL_N]) and its attribute "origin" = 1; closes.
 * 2. all ranks, parallel (mpio): H5Fopen(PATH, RDWR); each rank reads and
 *    checks /serial; creates /parallel (int64 [ROWS*P][COLS]) and writes its
 *    row block collectively; closes.
 * 3. rank 0, serial: H5Fopen(PATH, RDWR); checks /serial and /parallel;
 *    adds /serial2 (double [SERIAL_N]); closes.
 * 4. all ranks, parallel: H5Fopen(PATH, RDONLY); every rank checks all
 *    three datasets (collective reads); closes.
 * Between the steps MPI_Barrier. Prints "hdf5_serial OK" on rank 0 when
 * every rank checked everything, with "requests=N": the Weft data requests
 * rank 0's process sent (weft_mpiio_data_requests, found with dlsym; 0
 * without libweft_mpiio or when the file went through ROMIO). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERIAL_N 5000
#define ROWS 32
#define COLS 24

#include "hdf5_common.h"

static long bad = 0;

static int32_t serial_value(long i) { return (int32_t)(i * 7 + 3); }
static double serial2_value(long i) { return (double)i * 0.25 - 1.5; }
static int64_t parallel_value(long r, long c) { return ((int64_t)r << 20) + c * 3 + 1; }

static void write_1d(hid_t file, const char *name, hid_t type, const void *data) {
    hsize_t n = SERIAL_N;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(set);
    CHECK(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
    CHECK(H5Dclose(set));
    H5Sclose(space);
}

/* Checks /serial (kind 0) or /serial2 (kind 1), and /serial's attribute. */
static void check_1d(hid_t file, int kind, hid_t dxpl) {
    const char *name = kind ? "/serial2" : "/serial";
    hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
    CHECK(set);
    double *buf = calloc(SERIAL_N, sizeof(double));
    CHECK(H5Dread(set, kind ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, dxpl, buf));
    for (long i = 0; i < SERIAL_N; i++) {
        int ok = kind ? buf[i] == serial2_value(i) : ((int32_t *)buf)[i] == serial_value(i);
        if (!ok && bad++ < 5) fprintf(stderr, "rank %d: %s[%ld] wrong\n", rank, name, i);
    }
    if (!kind) {
        int origin = 0;
        hid_t attr = H5Aopen(set, "origin", H5P_DEFAULT);
        CHECK(attr);
        CHECK(H5Aread(attr, H5T_NATIVE_INT, &origin));
        CHECK(H5Aclose(attr));
        if (origin != 1) bad++, fprintf(stderr, "rank %d: /serial@origin = %d\n", rank, origin);
    }
    free(buf);
    CHECK(H5Dclose(set));
}

static void check_parallel(hid_t file, hid_t dxpl) {
    hid_t set = H5Dopen2(file, "/parallel", H5P_DEFAULT);
    CHECK(set);
    long n = (long)ROWS * nprocs * COLS;
    int64_t *buf = calloc(n, sizeof *buf);
    CHECK(H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, dxpl, buf));
    for (long r = 0; r < (long)ROWS * nprocs; r++)
        for (long c = 0; c < COLS; c++)
            if (buf[r * COLS + c] != parallel_value(r, c) && bad++ < 5)
                fprintf(stderr, "rank %d: /parallel[%ld][%ld] wrong\n", rank, r, c);
    free(buf);
    CHECK(H5Dclose(set));
}

static void step1_serial_create(const char *path) {
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(file);
    int32_t *data = malloc(sizeof(int32_t) * SERIAL_N);
    for (long i = 0; i < SERIAL_N; i++) data[i] = serial_value(i);
    write_1d(file, "/serial", H5T_NATIVE_INT32, data);
    hid_t set = H5Dopen2(file, "/serial", H5P_DEFAULT);
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(set, "origin", H5T_NATIVE_INT, scalar, H5P_DEFAULT, H5P_DEFAULT);
    int one = 1;
    CHECK(attr);
    CHECK(H5Awrite(attr, H5T_NATIVE_INT, &one));
    CHECK(H5Aclose(attr));
    H5Sclose(scalar);
    CHECK(H5Dclose(set));
    CHECK(H5Fclose(file));
    free(data);
}

static void step2_parallel_write(const char *path) {
    hid_t fapl = mpio_fapl(), dxpl = collective();
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, fapl);
    CHECK(file);
    check_1d(file, 0, dxpl);
    hsize_t dims[2] = {(hsize_t)ROWS * nprocs, COLS};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t set = H5Dcreate2(file, "/parallel", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(set);
    hsize_t start[2] = {(hsize_t)ROWS * rank, 0}, count[2] = {ROWS, COLS};
    CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mem = H5Screate_simple(2, count, NULL);
    int64_t *buf = malloc(sizeof(int64_t) * ROWS * COLS);
    for (long r = 0; r < ROWS; r++)
        for (long c = 0; c < COLS; c++) buf[r * COLS + c] = parallel_value((long)ROWS * rank + r, c);
    CHECK(H5Dwrite(set, H5T_NATIVE_INT64, mem, space, dxpl, buf));
    CHECK(H5Dclose(set));
    H5Sclose(space), H5Sclose(mem);
    CHECK(H5Fclose(file));
    H5Pclose(fapl), H5Pclose(dxpl);
    free(buf);
}

static void step3_serial_extend(const char *path) {
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(file);
    check_1d(file, 0, H5P_DEFAULT);
    check_parallel(file, H5P_DEFAULT);
    double *data = malloc(sizeof(double) * SERIAL_N);
    for (long i = 0; i < SERIAL_N; i++) data[i] = serial2_value(i);
    write_1d(file, "/serial2", H5T_NATIVE_DOUBLE, data);
    CHECK(H5Fclose(file));
    free(data);
}

static void step4_parallel_read(const char *path) {
    hid_t fapl = mpio_fapl(), dxpl = collective();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(file);
    check_1d(file, 0, dxpl);
    check_1d(file, 1, dxpl);
    check_parallel(file, dxpl);
    CHECK(H5Fclose(file));
    H5Pclose(fapl), H5Pclose(dxpl);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: hdf5_serial PATH\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *path = argv[1];
    if (rank == 0) step1_serial_create(path);
    MPI_Barrier(MPI_COMM_WORLD);
    step2_parallel_write(path);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) step3_serial_extend(path);
    MPI_Barrier(MPI_COMM_WORLD);
    step4_parallel_read(path);
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        int (*counter)(int64_t *, int64_t *) =
            (int (*)(int64_t *, int64_t *))dlsym(RTLD_DEFAULT, "weft_mpiio_data_requests");
        int64_t requests = 0, bytes = 0;
        if (counter) counter(&requests, &bytes);
        if (total == 0) printf("hdf5_serial OK (%s, %d ranks) requests=%lld\n", path, nprocs, (long long)requests);
        else printf("hdf5_serial FAILED: %ld wrong values\n", total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
