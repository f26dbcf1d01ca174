/* PnetCDF through MPI-IO.
 *
 *   pnetcdf_rw PATH [write|read|both|big]      (default both)
 *
 * write: ncmpi_create(PATH, NC_CLOBBER | NC_64BIT_DATA) and defines
 *   dims y = R*P, x = COLS, time = unlimited (R = ROWS rows per rank);
 *   temp(y, x)  float   each rank a block of R rows (put_vara_all)
 *   owner(y)    int     each rank its R entries     (put_vara_all)
 *   cols(y, x)  double  each rank every P-th column (put_vars_all, strided)
 *   rec(time, x) short  NREC records, each rank its own records
 *                       (record variables interleave in the file)
 *   attributes: global title (text), temp:units (text), temp:range (float[2])
 * big: the same with R = BIG_ROWS (a larger file, for the clobber case:
 *   a following `write` must replace it entirely), then read and verified.
 * read: ncmpi_open(NC_NOWRITE); checks dims, attributes, and every rank
 *   reads every variable whole with get_vara_all and verifies every value
 *   (R is taken from the file). Then ncmpi_create(NC_NOCLOBBER) of the
 *   existing PATH must fail with NC_EEXIST and leave it intact.
 *
 * On a `weft:` PATH PnetCDF's POSIX calls (rank 0's format sniff with
 * open()/read() in ncmpi_open, access() and truncate() in ncmpi_create)
 * are served by libweft_mpiio's interposer (c/posix.c).
 *
 * Prints "pnetcdf_rw OK" on rank 0 when every rank verified everything. */
#include <mpi.h>
#include <pnetcdf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 32
#define COLS 24
#define BIG_ROWS 160 /* rows per rank of the `big` dataset */
#define NREC 3 /* records per rank */
#define TITLE "weft pnetcdf_rw test"

static int rank, nprocs;

#define CHECK(expr)                                                                                 \
    do {                                                                                            \
        int err_ = (expr);                                                                          \
        if (err_ != NC_NOERR) {                                                                     \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", rank, __FILE__, __LINE__, #expr, ncmpi_strerror(err_)); \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
        }                                                                                           \
    } while (0)

static float temp_value(long r, long c) { return (float)r * 100.0f + (float)c + 0.5f; }
static double cols_value(long r, long c) { return (double)r * 1e6 + (double)c * 3.0 - 7.125; }
static short rec_value(long t, long c) { return (short)(t * 64 + c - 1000); }

static void write_file(const char *path, long rows) {
    int ncid, dy, dx, dt, temp, owner, cols, rec;
    CHECK(ncmpi_create(MPI_COMM_WORLD, path, NC_CLOBBER | NC_64BIT_DATA, MPI_INFO_NULL, &ncid));
    CHECK(ncmpi_def_dim(ncid, "y", (MPI_Offset)rows * nprocs, &dy));
    CHECK(ncmpi_def_dim(ncid, "x", COLS, &dx));
    CHECK(ncmpi_def_dim(ncid, "time", NC_UNLIMITED, &dt));
    int yx[2] = {dy, dx}, tx[2] = {dt, dx};
    CHECK(ncmpi_def_var(ncid, "temp", NC_FLOAT, 2, yx, &temp));
    CHECK(ncmpi_def_var(ncid, "owner", NC_INT, 1, &dy, &owner));
    CHECK(ncmpi_def_var(ncid, "cols", NC_DOUBLE, 2, yx, &cols));
    CHECK(ncmpi_def_var(ncid, "rec", NC_SHORT, 2, tx, &rec));
    CHECK(ncmpi_put_att_text(ncid, NC_GLOBAL, "title", strlen(TITLE), TITLE));
    CHECK(ncmpi_put_att_text(ncid, temp, "units", 6, "kelvin"));
    float range[2] = {0.5f, 1e9f};
    CHECK(ncmpi_put_att_float(ncid, temp, "range", NC_FLOAT, 2, range));
    CHECK(ncmpi_enddef(ncid));

    MPI_Offset start[2] = {(MPI_Offset)rows * rank, 0}, count[2] = {rows, COLS};
    float *tbuf = malloc(sizeof(float) * rows * COLS);
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < COLS; c++) tbuf[r * COLS + c] = temp_value(rows * rank + r, c);
    CHECK(ncmpi_put_vara_float_all(ncid, temp, start, count, tbuf));

    int *obuf = malloc(sizeof(int) * rows);
    for (int r = 0; r < rows; r++) obuf[r] = rank * 1000 + r;
    CHECK(ncmpi_put_vara_int_all(ncid, owner, start, count, obuf));

    /* Strided: rows 0..R*P, columns rank, rank+P, ... */
    int ncols = 0;
    for (int c = rank; c < COLS; c += nprocs) ncols++;
    MPI_Offset sstart[2] = {0, rank}, scount[2] = {(MPI_Offset)rows * nprocs, ncols}, sstride[2] = {1, nprocs};
    double *cbuf = malloc(sizeof(double) * rows * nprocs * (ncols ? ncols : 1));
    for (long r = 0; r < rows * nprocs; r++)
        for (long i = 0; i < ncols; i++) cbuf[r * ncols + i] = cols_value(r, rank + i * nprocs);
    CHECK(ncmpi_put_vars_double_all(ncid, cols, sstart, scount, sstride, cbuf));

    /* Records: rank p writes records p*NREC .. p*NREC+NREC-1. */
    MPI_Offset rstart[2] = {(MPI_Offset)rank * NREC, 0}, rcount[2] = {NREC, COLS};
    short rbuf[NREC * COLS];
    for (long t = 0; t < NREC; t++)
        for (long c = 0; c < COLS; c++) rbuf[t * COLS + c] = rec_value(rank * NREC + t, c);
    CHECK(ncmpi_put_vara_short_all(ncid, rec, rstart, rcount, rbuf));

    CHECK(ncmpi_sync(ncid));
    CHECK(ncmpi_close(ncid));
    free(tbuf), free(cbuf), free(obuf);
}

static long read_file(const char *path) {
    int ncid, ndims, nvars, ngatts, unlim;
    long bad = 0;
    CHECK(ncmpi_open(MPI_COMM_WORLD, path, NC_NOWRITE, MPI_INFO_NULL, &ncid));
    CHECK(ncmpi_inq(ncid, &ndims, &nvars, &ngatts, &unlim));
    if (ndims != 3 || nvars != 4 || ngatts != 1) bad++, fprintf(stderr, "rank %d: inq %d dims %d vars %d atts\n", rank, ndims, nvars, ngatts);
    int dy, dx, dt, temp, owner, cols, rec;
    MPI_Offset ny, nx, nt;
    CHECK(ncmpi_inq_dimid(ncid, "y", &dy));
    CHECK(ncmpi_inq_dimid(ncid, "x", &dx));
    CHECK(ncmpi_inq_dimid(ncid, "time", &dt));
    CHECK(ncmpi_inq_dimlen(ncid, dy, &ny));
    CHECK(ncmpi_inq_dimlen(ncid, dx, &nx));
    CHECK(ncmpi_inq_dimlen(ncid, dt, &nt));
    long rows = (long)(ny / nprocs);
    if ((rows != ROWS && rows != BIG_ROWS) || ny != (MPI_Offset)rows * nprocs || nx != COLS || nt != (MPI_Offset)NREC * nprocs || unlim != dt) {
        fprintf(stderr, "rank %d: dims %lld %lld %lld\n", rank, (long long)ny, (long long)nx, (long long)nt);
        bad++;
        ncmpi_close(ncid);
        return bad;
    }
    CHECK(ncmpi_inq_varid(ncid, "temp", &temp));
    CHECK(ncmpi_inq_varid(ncid, "owner", &owner));
    CHECK(ncmpi_inq_varid(ncid, "cols", &cols));
    CHECK(ncmpi_inq_varid(ncid, "rec", &rec));

    char text[64];
    MPI_Offset len;
    memset(text, 0, sizeof text);
    CHECK(ncmpi_inq_attlen(ncid, NC_GLOBAL, "title", &len));
    CHECK(ncmpi_get_att_text(ncid, NC_GLOBAL, "title", text));
    if (len != (MPI_Offset)strlen(TITLE) || strcmp(text, TITLE) != 0) bad++, fprintf(stderr, "rank %d: title '%s'\n", rank, text);
    memset(text, 0, sizeof text);
    CHECK(ncmpi_get_att_text(ncid, temp, "units", text));
    if (strcmp(text, "kelvin") != 0) bad++, fprintf(stderr, "rank %d: units '%s'\n", rank, text);
    float range[2] = {0, 0};
    CHECK(ncmpi_get_att_float(ncid, temp, "range", range));
    if (range[0] != 0.5f || range[1] != 1e9f) bad++, fprintf(stderr, "rank %d: range wrong\n", rank);

    MPI_Offset start[2] = {0, 0}, count[2] = {ny, nx};
    float *tbuf = malloc(sizeof(float) * ny * nx);
    double *cbuf = malloc(sizeof(double) * ny * nx);
    int *obuf = malloc(sizeof(int) * ny);
    short *rbuf = malloc(sizeof(short) * nt * nx);
    CHECK(ncmpi_get_vara_float_all(ncid, temp, start, count, tbuf));
    CHECK(ncmpi_get_vara_double_all(ncid, cols, start, count, cbuf));
    CHECK(ncmpi_get_vara_int_all(ncid, owner, start, count, obuf));
    MPI_Offset rcount[2] = {nt, nx};
    CHECK(ncmpi_get_vara_short_all(ncid, rec, start, rcount, rbuf));
    for (long r = 0; r < ny; r++) {
        if (obuf[r] != (int)((r / rows) * 1000 + r % rows) && bad++ < 5) fprintf(stderr, "rank %d: owner[%ld] = %d\n", rank, r, obuf[r]);
        for (long c = 0; c < nx; c++) {
            if (tbuf[r * nx + c] != temp_value(r, c) && bad++ < 5) fprintf(stderr, "rank %d: temp[%ld][%ld] wrong\n", rank, r, c);
            if (cbuf[r * nx + c] != cols_value(r, c) && bad++ < 5) fprintf(stderr, "rank %d: cols[%ld][%ld] wrong\n", rank, r, c);
        }
    }
    for (long t = 0; t < nt; t++)
        for (long c = 0; c < nx; c++)
            if (rbuf[t * nx + c] != rec_value(t, c) && bad++ < 5) fprintf(stderr, "rank %d: rec[%ld][%ld] wrong\n", rank, t, c);
    CHECK(ncmpi_close(ncid));
    free(tbuf), free(cbuf), free(obuf), free(rbuf);

    /* NC_NOCLOBBER on an existing file: NC_EEXIST (rank 0's access()). */
    int other, err = ncmpi_create(MPI_COMM_WORLD, path, NC_NOCLOBBER | NC_64BIT_DATA, MPI_INFO_NULL, &other);
    if (err != NC_EEXIST) {
        bad++;
        fprintf(stderr, "rank %d: NC_NOCLOBBER create of an existing file: %s\n", rank, ncmpi_strerror(err));
        if (err == NC_NOERR) ncmpi_close(other);
    }
    return bad;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: pnetcdf_rw PATH [write|read|both|big]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *path = argv[1], *mode = argc > 2 ? argv[2] : "both";
    long bad = 0, total = 0;
    if (strcmp(mode, "big") == 0) write_file(path, BIG_ROWS);
    else if (strcmp(mode, "read") != 0) write_file(path, ROWS);
    if (strcmp(mode, "write") != 0) bad = read_file(path);
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0) printf("pnetcdf_rw OK (%s, %s, %d ranks)\n", mode, path, nprocs);
        else printf("pnetcdf_rw FAILED: %ld wrong values\n", total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
