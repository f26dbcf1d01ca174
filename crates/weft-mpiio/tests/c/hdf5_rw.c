/* Parallel HDF5 through MPI-IO (H5Pset_fapl_mpio).
 *
 *   hdf5_rw PATH [write|read|both|write-open]      (default both)
 *
 * write: creates PATH (H5F_ACC_TRUNC) and writes, collectively:
 *   /rows    int32   [ROWS*P][COLS]   each rank a block of ROWS rows
 *   /cols    double  [ROWS][COLS*P]   each rank every P-th column (strided
 *                                     hyperslab: a noncontiguous file type)
 *   /chunked int64   [ROWS*P][COLS]   chunks of CHUNK_R x CHUNK_C, each rank
 *                                     its row block
 *   attributes: /rows@ranks (int, = P), /rows@scale (double[3]),
 *               file-level /@title (string)
 * write-open: as write, but leaves the datasets and the file open (no
 *   flush, no close): HDF5 closes them from its MPI_COMM_SELF attribute
 *   callback inside MPI_Finalize, and a later `read` job checks the file.
 * read: reopens PATH read-only; every rank reads every dataset whole
 *   (collectively), the attributes, and verifies every value.
 *
 * Prints "hdf5_rw OK" on rank 0 when every rank verified everything. Any
 * HDF5 or MPI failure is reported with the call that failed. */
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 48
#define COLS 40
#define CHUNK_R 16
#define CHUNK_C 8
#define TITLE "weft hdf5_rw test"

#include "hdf5_common.h"

static int32_t row_value(long r, long c) { return (int32_t)(r * 1000 + c + 7); }
static double col_value(long r, long c) { return (double)r * 0.5 + (double)c * 1024.0 + 0.25; }
static int64_t chunk_value(long r, long c) { return ((int64_t)r << 33) ^ (int64_t)(c * 2654435761u); }

static void write_file(const char *path, int leave_open) {
    hid_t fapl = mpio_fapl(), dxpl = collective();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file);

    /* /rows: a block of ROWS rows per rank. */
    hsize_t rdims[2] = {(hsize_t)ROWS * nprocs, COLS};
    hid_t rspace = H5Screate_simple(2, rdims, NULL);
    hid_t rows = H5Dcreate2(file, "/rows", H5T_NATIVE_INT32, rspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(rows);
    hsize_t rstart[2] = {(hsize_t)ROWS * rank, 0}, rcount[2] = {ROWS, COLS};
    CHECK(H5Sselect_hyperslab(rspace, H5S_SELECT_SET, rstart, NULL, rcount, NULL));
    hid_t rmem = H5Screate_simple(2, rcount, NULL);
    int32_t *rbuf = malloc(sizeof(int32_t) * ROWS * COLS);
    for (long r = 0; r < ROWS; r++)
        for (long c = 0; c < COLS; c++) rbuf[r * COLS + c] = row_value(ROWS * rank + r, c);
    CHECK(H5Dwrite(rows, H5T_NATIVE_INT32, rmem, rspace, dxpl, rbuf));

    /* Attributes on /rows and on the file. */
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(rows, "ranks", H5T_NATIVE_INT, scalar, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(attr);
    CHECK(H5Awrite(attr, H5T_NATIVE_INT, &nprocs));
    CHECK(H5Aclose(attr));
    hsize_t three = 3;
    hid_t vec3 = H5Screate_simple(1, &three, NULL);
    double scale[3] = {1.5, -2.25, 1e300};
    attr = H5Acreate2(rows, "scale", H5T_NATIVE_DOUBLE, vec3, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(attr);
    CHECK(H5Awrite(attr, H5T_NATIVE_DOUBLE, scale));
    CHECK(H5Aclose(attr));
    hid_t str = H5Tcopy(H5T_C_S1);
    CHECK(H5Tset_size(str, sizeof(TITLE)));
    attr = H5Acreate2(file, "title", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(attr);
    CHECK(H5Awrite(attr, str, TITLE));
    CHECK(H5Aclose(attr));

    /* /cols: every nprocs-th column from `rank` (strided in the file). */
    hsize_t cdims[2] = {ROWS, (hsize_t)COLS * nprocs};
    hid_t cspace = H5Screate_simple(2, cdims, NULL);
    hid_t cols = H5Dcreate2(file, "/cols", H5T_NATIVE_DOUBLE, cspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(cols);
    hsize_t cstart[2] = {0, (hsize_t)rank}, cstride[2] = {1, (hsize_t)nprocs}, ccount[2] = {ROWS, COLS};
    CHECK(H5Sselect_hyperslab(cspace, H5S_SELECT_SET, cstart, cstride, ccount, NULL));
    hid_t cmem = H5Screate_simple(2, ccount, NULL);
    double *cbuf = malloc(sizeof(double) * ROWS * COLS);
    for (long r = 0; r < ROWS; r++)
        for (long c = 0; c < COLS; c++) cbuf[r * COLS + c] = col_value(r, c * nprocs + rank);
    CHECK(H5Dwrite(cols, H5T_NATIVE_DOUBLE, cmem, cspace, dxpl, cbuf));

    /* /chunked: a chunked layout (allocated collectively). */
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[2] = {CHUNK_R, CHUNK_C};
    CHECK(H5Pset_chunk(dcpl, 2, chunk));
    hid_t kspace = H5Screate_simple(2, rdims, NULL);
    hid_t chunked = H5Dcreate2(file, "/chunked", H5T_NATIVE_INT64, kspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(chunked);
    CHECK(H5Sselect_hyperslab(kspace, H5S_SELECT_SET, rstart, NULL, rcount, NULL));
    int64_t *kbuf = malloc(sizeof(int64_t) * ROWS * COLS);
    for (long r = 0; r < ROWS; r++)
        for (long c = 0; c < COLS; c++) kbuf[r * COLS + c] = chunk_value(ROWS * rank + r, c);
    CHECK(H5Dwrite(chunked, H5T_NATIVE_INT64, rmem, kspace, dxpl, kbuf));
    free(rbuf), free(cbuf), free(kbuf);
    if (leave_open) return; /* closed by HDF5 inside MPI_Finalize */

    CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
    CHECK(H5Dclose(rows));
    CHECK(H5Dclose(cols));
    CHECK(H5Dclose(chunked));
    H5Sclose(rspace), H5Sclose(rmem), H5Sclose(cspace), H5Sclose(cmem), H5Sclose(kspace);
    H5Sclose(scalar), H5Sclose(vec3), H5Tclose(str), H5Pclose(dcpl);
    CHECK(H5Fclose(file));
    H5Pclose(fapl), H5Pclose(dxpl);
}

static long verify_dataset(hid_t file, const char *name, hid_t type, size_t size, hsize_t d0, hsize_t d1, int kind,
                           hid_t dxpl) {
    hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
    CHECK(set);
    hid_t space = H5Dget_space(set);
    hsize_t dims[2] = {0, 0};
    if (H5Sget_simple_extent_ndims(space) != 2 || H5Sget_simple_extent_dims(space, dims, NULL) != 2 || dims[0] != d0 ||
        dims[1] != d1) {
        fprintf(stderr, "rank %d: %s: dims %llu x %llu, expected %llu x %llu\n", rank, name, (unsigned long long)dims[0],
                (unsigned long long)dims[1], (unsigned long long)d0, (unsigned long long)d1);
        return 1;
    }
    char *buf = malloc(size * d0 * d1);
    memset(buf, 0xA5, size * d0 * d1);
    CHECK(H5Dread(set, type, H5S_ALL, H5S_ALL, dxpl, buf));
    long bad = 0;
    for (hsize_t r = 0; r < d0; r++)
        for (hsize_t c = 0; c < d1; c++) {
            size_t at = r * d1 + c;
            int ok;
            if (kind == 0) ok = ((int32_t *)buf)[at] == row_value(r, c);
            else if (kind == 1) ok = ((double *)buf)[at] == col_value(r, c);
            else ok = ((int64_t *)buf)[at] == chunk_value(r, c);
            if (!ok && bad++ < 5)
                fprintf(stderr, "rank %d: %s[%llu][%llu] wrong\n", rank, name, (unsigned long long)r, (unsigned long long)c);
        }
    free(buf);
    H5Sclose(space);
    CHECK(H5Dclose(set));
    return bad;
}

static long read_file(const char *path) {
    hid_t fapl = mpio_fapl(), dxpl = collective();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(file);
    long bad = 0;
    bad += verify_dataset(file, "/rows", H5T_NATIVE_INT32, 4, (hsize_t)ROWS * nprocs, COLS, 0, dxpl);
    bad += verify_dataset(file, "/cols", H5T_NATIVE_DOUBLE, 8, ROWS, (hsize_t)COLS * nprocs, 1, dxpl);
    bad += verify_dataset(file, "/chunked", H5T_NATIVE_INT64, 8, (hsize_t)ROWS * nprocs, COLS, 2, dxpl);

    hid_t rows = H5Dopen2(file, "/rows", H5P_DEFAULT);
    CHECK(rows);
    int ranks = -1;
    hid_t attr = H5Aopen(rows, "ranks", H5P_DEFAULT);
    CHECK(attr);
    CHECK(H5Aread(attr, H5T_NATIVE_INT, &ranks));
    CHECK(H5Aclose(attr));
    if (ranks != nprocs) bad++, fprintf(stderr, "rank %d: attribute ranks = %d\n", rank, ranks);
    double scale[3] = {0, 0, 0};
    attr = H5Aopen(rows, "scale", H5P_DEFAULT);
    CHECK(attr);
    CHECK(H5Aread(attr, H5T_NATIVE_DOUBLE, scale));
    CHECK(H5Aclose(attr));
    if (scale[0] != 1.5 || scale[1] != -2.25 || scale[2] != 1e300) bad++, fprintf(stderr, "rank %d: attribute scale wrong\n", rank);
    char title[sizeof(TITLE) + 8];
    memset(title, 0, sizeof title);
    hid_t str = H5Tcopy(H5T_C_S1);
    CHECK(H5Tset_size(str, sizeof(TITLE)));
    attr = H5Aopen(file, "title", H5P_DEFAULT);
    CHECK(attr);
    CHECK(H5Aread(attr, str, title));
    CHECK(H5Aclose(attr));
    if (strcmp(title, TITLE) != 0) bad++, fprintf(stderr, "rank %d: attribute title = '%s'\n", rank, title);
    H5Tclose(str);
    CHECK(H5Dclose(rows));
    CHECK(H5Fclose(file));
    H5Pclose(fapl), H5Pclose(dxpl);
    return bad;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: hdf5_rw PATH [write|read|both|write-open]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *path = argv[1], *mode = argc > 2 ? argv[2] : "both";
    long bad = 0, total = 0;
    int leave_open = strcmp(mode, "write-open") == 0;
    if (strcmp(mode, "read") != 0) write_file(path, leave_open);
    if (strcmp(mode, "write") != 0 && !leave_open) bad = read_file(path);
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0) printf("hdf5_rw OK (%s, %s, %d ranks)\n", mode, path, nprocs);
        else printf("hdf5_rw FAILED: %ld wrong values\n", total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
