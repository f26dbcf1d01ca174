/* HDF5's linked-chunk collective I/O over many chunks (issue 24): with
 * H5FD_MPIO_CHUNK_ONE_IO HDF5 builds one MPI struct type with one entry
 * per chunk a rank touches, for the file and for memory, and makes one
 * collective MPI-IO call. Weft once refused such types beyond 4,096
 * entries (MPI_ERR_TYPE at MPI_File_set_view).
 *
 *   hdf5_chunks PATH [CHUNKS]      (default 20000 chunks per rank)
 *
 * Creates PATH with a 1-D int64 dataset of CHUNKS * P chunks of CHUNK
 * elements; rank r writes chunks r, r + P, r + 2P, ... (every P-th chunk,
 * so its file selection is CHUNKS separate pieces) in one collective
 * H5Dwrite; closes, reopens read-only and reads the whole dataset back
 * collectively on every rank (one-IO linked-chunk again), checking every
 * value. Prints "hdf5_chunks OK" on rank 0 when every rank checked
 * everything. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hdf5_common.h"

#define CHUNK 4

static int64_t value(long i) { return (int64_t)i * 3 + 11; }

static hid_t one_io(void) {
    hid_t dxpl = collective();
    CHECK(H5Pset_dxpl_mpio_chunk_opt(dxpl, H5FD_MPIO_CHUNK_ONE_IO));
    return dxpl;
}

static void write_chunks(const char *path, long chunks) {
    hid_t fapl = mpio_fapl(), dxpl = one_io();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file);
    hsize_t total = (hsize_t)chunks * nprocs * CHUNK, chunk = CHUNK;
    hid_t space = H5Screate_simple(1, &total, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Pset_chunk(dcpl, 1, &chunk));
    hid_t set = H5Dcreate2(file, "/chunked", H5T_NATIVE_INT64, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(set);
    /* Every P-th chunk, starting at this rank's. */
    hsize_t start = (hsize_t)rank * CHUNK, stride = (hsize_t)nprocs * CHUNK, count = (hsize_t)chunks, block = CHUNK;
    CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, &stride, &count, &block));
    hsize_t mine = (hsize_t)chunks * CHUNK;
    hid_t mem = H5Screate_simple(1, &mine, NULL);
    int64_t *buf = malloc(sizeof(int64_t) * mine);
    for (long k = 0; k < chunks; k++)
        for (long e = 0; e < CHUNK; e++) buf[k * CHUNK + e] = value((k * nprocs + rank) * CHUNK + e);
    CHECK(H5Dwrite(set, H5T_NATIVE_INT64, mem, space, dxpl, buf));
    CHECK(H5Dclose(set));
    H5Sclose(space), H5Sclose(mem), H5Pclose(dcpl);
    CHECK(H5Fclose(file));
    H5Pclose(fapl), H5Pclose(dxpl);
    free(buf);
}

static long read_chunks(const char *path, long chunks) {
    hid_t fapl = mpio_fapl(), dxpl = one_io();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(file);
    hid_t set = H5Dopen2(file, "/chunked", H5P_DEFAULT);
    CHECK(set);
    long total = chunks * nprocs * CHUNK, bad = 0;
    int64_t *buf = malloc(sizeof(int64_t) * total);
    memset(buf, 0xA5, sizeof(int64_t) * total);
    CHECK(H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, dxpl, buf));
    for (long i = 0; i < total; i++)
        if (buf[i] != value(i) && bad++ < 5) fprintf(stderr, "rank %d: element %ld wrong\n", rank, i);
    CHECK(H5Dclose(set));
    CHECK(H5Fclose(file));
    H5Pclose(fapl), H5Pclose(dxpl);
    free(buf);
    return bad;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: hdf5_chunks PATH [CHUNKS]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    long chunks = argc > 2 ? atol(argv[2]) : 20000, bad, total = 0;
    write_chunks(argv[1], chunks);
    bad = read_chunks(argv[1], chunks);
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0) printf("hdf5_chunks OK (%s, %ld chunks per rank, %d ranks)\n", argv[1], chunks, nprocs);
        else printf("hdf5_chunks FAILED: %ld wrong values\n", total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
