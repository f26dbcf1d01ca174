/* FLASH-IO checkpoint through direct MPI-IO with datatypes (Ching ch.3/4):
 * each process holds NB blocks of (NX+2G)^3 cells (NX^3 interior plus G
 * guard cells on each side) of NV double variables, the variables
 * interleaved per cell in memory (FLASH's unk(var, i, j, k, block); in C
 * unk[block][k][j][i][var]). The file is variable-major: for each
 * variable, the interior cells of all blocks of all processes, block by
 * block in global block order (process p's blocks after those of 0..p-1),
 * each block's cells in k, j, i order. Memory pieces are 8 bytes (one
 * double); in the file a process's part of one variable is NB blocks of
 * NX^3 doubles in a row.
 *
 *   flash_io --path PATH [options]
 *
 * One call writes the whole checkpoint of a process: memory type a struct
 * of NV subarrays (variable v's interior cells), file type a vector of NV
 * runs of NB*NX^3 doubles, one per variable; the restart reads it back the
 * same way. Thesis size (the defaults): 80 blocks of 8^3 interior cells,
 * 4 guard cells, 24 variables: 7.5 MiB per process of 983,040 8-byte
 * memory pieces.
 *
 * Per method (apps.h): checkpoint write (timed), the whole file checked
 * byte for byte (untimed), restart read into cleared memory (timed), every
 * interior value checked and every guard cell checked untouched (untimed).
 *
 * Built with -DWEFT_HDF5 and parallel HDF5 (the Makefile's flash_io_hdf5,
 * OpenMPI only: Debian builds HDF5 against OpenMPI), `--api hdf5` writes
 * the same checkpoint through HDF5 instead, as FLASH does: one dataset per
 * variable ([all blocks][NX][NX][NX] doubles), each process writing its
 * blocks' hyperslab from a strided memory selection of unk, the method's
 * hints given to H5Pset_fapl_mpio, collective or independent transfers by
 * the method; the timed write is create to close, the timed read open to
 * close. The write is checked by reading each process's hyperslab back into
 * contiguous memory (untimed): HDF5's own bytes (headers, object times)
 * are not a pattern. Measured: HDF5 1.10's MPI-IO driver turns an
 * independent transfer of the interleaved memory into one MPI-IO call per
 * 8-byte piece (like posix here); only collective transfers reach the
 * MPI-IO layer as datatypes.
 *
 * Options: --blocks NB (80)  --cells NX (8)  --guard G (4)  --vars NV (24)
 *   --api mpiio|hdf5 (mpiio)
 *   --methods LIST (all of apps.h)  --sync (MPI_File_sync inside the timed
 *   write)  --keep (leave the file)
 * One JSON object per (method, phase) on stdout. */
#include "apps.h"

#include <getopt.h>

typedef struct {
    long long nb, nx, ng, nv;
    long long side;       /* nx + 2 ng */
    long long mem_bytes;  /* one process's unk array */
    long long file_bytes; /* the checkpoint */
    int sync;             /* MPI_File_sync inside the timed write (MPI-IO) */
    int hdf5;             /* --api hdf5 */
} flash_t;

/* Byte offset in unk of variable v of interior cell (k, j, i) of block b. */
static long long mem_offset(const flash_t *f, long long b, long long k, long long j, long long i, long long v) {
    return ((((b * f->side + k + f->ng) * f->side + j + f->ng) * f->side + i + f->ng) * f->nv + v) * 8;
}

/* File offset of the same value. */
static long long file_offset(const flash_t *f, long long b, long long k, long long j, long long i, long long v) {
    long long cells = f->nx * f->nx * f->nx, block = v * f->nb * g_procs + g_rank * f->nb + b;
    return (block * cells + (k * f->nx + j) * f->nx + i) * 8;
}

/* Fills (pattern; guard cells get 0xEE) or checks (interior against the
 * pattern, guard cells still 0) a process's unk array. */
static long long flash_pattern(const flash_t *f, unsigned char *unk, uint64_t file_id, int check) {
    long long bad = 0;
    if (!check) memset(unk, 0xEE, (size_t)f->mem_bytes);
    unsigned char *interior = check ? calloc((size_t)f->mem_bytes, 1) : NULL;
    if (check && !interior) die("out of memory");
    for (long long b = 0; b < f->nb; b++)
        for (long long k = 0; k < f->nx; k++)
            for (long long j = 0; j < f->nx; j++)
                for (long long i = 0; i < f->nx; i++)
                    for (long long v = 0; v < f->nv; v++) {
                        long long m = mem_offset(f, b, k, j, i, v), off = file_offset(f, b, k, j, i, v);
                        if (check) bad += pattern_check(unk + m, file_id, (uint64_t)off, 8, "flash read"), memset(interior + m, 1, 8);
                        else pattern_fill(unk + m, file_id, (uint64_t)off, 8);
                    }
    if (check) {
        long long touched = 0;
        for (long long m = 0; m < f->mem_bytes; m++) touched += !interior[m] && unk[m] != 0;
        if (touched) fprintf(stderr, "rank %d: flash read wrote %lld guard-cell bytes\n", g_rank, touched);
        bad += touched;
        free(interior);
    }
    return bad;
}

typedef struct {
    const flash_t *f;
    unsigned char *unk;
} flash_read_t;

static long long check_flash(const void *ctx, uint64_t file_id) {
    const flash_read_t *r = ctx;
    return flash_pattern(r->f, r->unk, file_id, 1);
}

/* Memory: struct of nv subarrays (variable v's interior cells, all blocks). */
static MPI_Datatype memory_type(const flash_t *f) {
    int sizes[5] = {(int)f->nb, (int)f->side, (int)f->side, (int)f->side, (int)f->nv};
    int subsizes[5] = {(int)f->nb, (int)f->nx, (int)f->nx, (int)f->nx, 1};
    MPI_Datatype *vars = malloc(sizeof(MPI_Datatype) * (size_t)f->nv), type;
    int *ones = malloc(sizeof(int) * (size_t)f->nv);
    MPI_Aint *zeros = calloc((size_t)f->nv, sizeof(MPI_Aint));
    if (!vars || !ones || !zeros) die("out of memory");
    for (long long v = 0; v < f->nv; v++) {
        int starts[5] = {0, (int)f->ng, (int)f->ng, (int)f->ng, (int)v};
        MPI_CHECK(MPI_Type_create_subarray(5, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &vars[v]));
        ones[v] = 1;
    }
    MPI_CHECK(MPI_Type_create_struct((int)f->nv, ones, zeros, vars, &type));
    MPI_CHECK(MPI_Type_commit(&type));
    for (long long v = 0; v < f->nv; v++) MPI_Type_free(&vars[v]);
    free(vars), free(ones), free(zeros);
    return type;
}

#ifdef WEFT_HDF5
#include <hdf5.h>

#define H5_CHECK(call)                                                          \
    do {                                                                        \
        if ((call) < 0) die("%s:%d: %s failed", __FILE__, __LINE__, #call); \
    } while (0)

/* Selects variable v's interior cells of unk in the memory dataspace. */
static void select_var(const flash_t *f, hid_t mspace, long long v) {
    hsize_t start[5] = {0, (hsize_t)f->ng, (hsize_t)f->ng, (hsize_t)f->ng, (hsize_t)v};
    hsize_t count[5] = {(hsize_t)f->nb, (hsize_t)f->nx, (hsize_t)f->nx, (hsize_t)f->nx, 1};
    H5_CHECK(H5Sselect_hyperslab(mspace, H5S_SELECT_SET, start, NULL, count, NULL));
}

/* Untimed: each process's hyperslab of every variable, read back into
 * contiguous memory, against the pattern. Wrong bytes, this rank. */
static long long hdf5_check_written(const char *path, const flash_t *f, hid_t fapl, hid_t fspace, uint64_t file_id) {
    long long cells = f->nb * f->nx * f->nx * f->nx, bad = 0;
    unsigned char *buf = malloc((size_t)cells * 8);
    if (!buf) die("out of memory");
    hsize_t dims[1] = {(hsize_t)cells};
    hid_t mspace = H5Screate_simple(1, dims, NULL), file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5_CHECK(file);
    for (long long v = 0; v < f->nv; v++) {
        char name[32];
        snprintf(name, sizeof name, "var%03lld", v);
        hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
        H5_CHECK(ds);
        H5_CHECK(H5Dread(ds, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, buf));
        H5_CHECK(H5Dclose(ds));
        unsigned char *p = buf;
        for (long long b = 0; b < f->nb; b++)
            for (long long k = 0; k < f->nx; k++)
                for (long long j = 0; j < f->nx; j++)
                    for (long long i = 0; i < f->nx; i++, p += 8)
                        bad += pattern_check(p, file_id, (uint64_t)file_offset(f, b, k, j, i, v), 8, "flash hdf5 write");
    }
    H5_CHECK(H5Fclose(file));
    H5Sclose(mspace);
    free(buf);
    return bad;
}

/* The checkpoint and restart through parallel HDF5 (see the top). */
static void hdf5_run(const char *path, const flash_t *f, const method_t *m, uint64_t file_id, unsigned char *wbuf,
                     unsigned char *rbuf, double seconds[2]) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, m->info));
    H5_CHECK(H5Pset_dxpl_mpio(dxpl, m->collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));
    hsize_t mdims[5] = {(hsize_t)f->nb, (hsize_t)f->side, (hsize_t)f->side, (hsize_t)f->side, (hsize_t)f->nv};
    hsize_t fdims[4] = {(hsize_t)(f->nb * g_procs), (hsize_t)f->nx, (hsize_t)f->nx, (hsize_t)f->nx};
    hsize_t fstart[4] = {(hsize_t)(f->nb * g_rank), 0, 0, 0}, fcount[4] = {(hsize_t)f->nb, fdims[1], fdims[2], fdims[3]};
    hid_t mspace = H5Screate_simple(5, mdims, NULL), fspace = H5Screate_simple(4, fdims, NULL);
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, fstart, NULL, fcount, NULL));
    for (int phase = 0; phase < 2; phase++) {
        double t0 = app_start();
        hid_t file = phase == 0 ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : H5Fopen(path, H5F_ACC_RDONLY, fapl);
        H5_CHECK(file);
        for (long long v = 0; v < f->nv; v++) {
            char name[32];
            snprintf(name, sizeof name, "var%03lld", v);
            hid_t ds = phase == 0 ? H5Dcreate2(file, name, H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                                  : H5Dopen2(file, name, H5P_DEFAULT);
            H5_CHECK(ds);
            select_var(f, mspace, v);
            if (phase == 0) H5_CHECK(H5Dwrite(ds, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, wbuf));
            else H5_CHECK(H5Dread(ds, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, rbuf));
            H5_CHECK(H5Dclose(ds));
        }
        H5_CHECK(H5Fclose(file));
        seconds[phase] = app_elapsed(t0);
        if (phase == 0 && sum_all(hdf5_check_written(path, f, fapl, fspace, file_id)))
            die("flash_io hdf5 %s: file differs after write", m->name);
    }
    flash_read_t ctx = {f, rbuf};
    if (sum_all(check_flash(&ctx, file_id))) die("flash_io hdf5 %s: read back wrong data", m->name);
    H5Sclose(mspace), H5Sclose(fspace), H5Pclose(fapl), H5Pclose(dxpl);
}
#endif

static void run_method(const char *path, const void *ctx_flash, const char *name, uint64_t file_id) {
    const flash_t *f = ctx_flash;
    int hdf5 = f->hdf5;
    method_t m = method_make(name);
    long long run = f->nb * f->nx * f->nx * f->nx;
    MPI_Datatype memtype = memory_type(f), filetype;
    MPI_CHECK(MPI_Type_vector((int)f->nv, (int)run, (int)(run * g_procs), MPI_DOUBLE, &filetype));
    MPI_CHECK(MPI_Type_commit(&filetype));
    unsigned char *wbuf = malloc((size_t)f->mem_bytes), *rbuf = calloc((size_t)f->mem_bytes, 1);
    if (!wbuf || !rbuf) die("out of memory");
    flash_pattern(f, wbuf, file_id, 0);
    double seconds[2];
    if (hdf5) {
#ifdef WEFT_HDF5
        hdf5_run(path, f, &m, file_id, wbuf, rbuf, seconds);
#endif
    } else {
        MPI_Offset disp = g_rank * run * 8;
        access_t write = {disp, MPI_DOUBLE, filetype, 0, wbuf, 1, memtype}, read = write;
        read.buf = rbuf;
        flash_read_t ctx = {f, rbuf};
        app_run("flash_io", path, &m, file_id, f->sync, 0, &write, 1, &read, 1, f->file_bytes, check_flash, &ctx, seconds);
    }
    const char *phases[] = {"write", "read"};
    for (int p = 0; p < 2; p++) {
        json_t j;
        app_json(&j, "flash_io", path, name, phases[p], f->file_bytes, seconds[p]);
        json_str(&j, "api", hdf5 ? "hdf5" : "mpiio");
        json_int(&j, "blocks_per_proc", f->nb);
        json_int(&j, "cells", f->nx);
        json_int(&j, "guard", f->ng);
        json_int(&j, "vars", f->nv);
        json_int(&j, "memory_pieces_per_proc", run * f->nv);
        json_end(&j);
    }
    MPI_Type_free(&memtype);
    MPI_Type_free(&filetype);
    free(wbuf), free(rbuf);
    method_free(&m);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    const char *path = NULL, *methods = APP_METHODS;
    flash_t f = {80, 8, 4, 24, 0, 0, 0, 0, 0};
    int keep = 0;
    static struct option opts[] = {{"path", 1, 0, 'p'},  {"methods", 1, 0, 'm'}, {"blocks", 1, 0, 'b'},
                                   {"cells", 1, 0, 'n'}, {"guard", 1, 0, 'g'},   {"vars", 1, 0, 'v'},
                                   {"sync", 0, 0, 's'},  {"keep", 0, 0, 'k'},    {"api", 1, 0, 'a'},
                                   {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': path = optarg; break;
        case 'm': methods = optarg; break;
        case 'b': f.nb = atoll(optarg); break;
        case 'n': f.nx = atoll(optarg); break;
        case 'g': f.ng = atoll(optarg); break;
        case 'v': f.nv = atoll(optarg); break;
        case 's': f.sync = 1; break;
        case 'a':
            if (strcmp(optarg, "hdf5") == 0) f.hdf5 = 1;
            else if (strcmp(optarg, "mpiio") != 0) die("--api wants mpiio or hdf5");
            break;
        case 'k': keep = 1; break;
        default: die("unknown option");
        }
    }
    if (!path) die("--path is required");
    if (f.nb < 1 || f.nx < 1 || f.ng < 0 || f.nv < 1) die("blocks, cells and vars must be positive, guard not negative");
    f.side = f.nx + 2 * f.ng;
    f.mem_bytes = f.nb * f.side * f.side * f.side * f.nv * 8;
    f.file_bytes = f.nb * g_procs * f.nx * f.nx * f.nx * f.nv * 8;
    if (f.mem_bytes > (1LL << 31) - 1 || f.file_bytes / 8 > (1LL << 31) - 1) die("too large for int counts");
#ifndef WEFT_HDF5
    if (f.hdf5) die("built without HDF5: use flash_io_hdf5 (bench/mpi/Makefile)");
#endif
    app_each_method(path, methods, 300, keep, run_method, &f);
    MPI_Finalize();
    return 0;
}
