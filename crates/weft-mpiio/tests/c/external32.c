/* Data representations: external32, internal, and one registered with
 * MPI_Register_datarep. usage: external32 PATH write | read WRITER_RANKS
 *
 * write: three sections, each rank its own part.
 *  1. ints through an interleaved view (vector file type; displacements
 *     from MPI_File_get_type_extent), "external32", collective;
 *  2. records of a struct of predefined types (int, double, short,
 *     char[3], long long, float, unsigned, signed char, unsigned short,
 *     unsigned long long, long double, double complex, C bool, unsigned
 *     char), from a struct memory type with holes,
 *     "external32", independent, byte view. MPI_LONG (4 bytes in
 *     external32, 8 natively; OpenMPI's MPI_Pack_external_size even says
 *     8) is refused by Weft with MPI_ERR_UNSUPPORTED_DATAREP: checked;
 *  3. doubles through "weft_swap", a registered representation whose
 *     conversion functions reverse each 8-byte double (big-endian doubles:
 *     the same bytes as external32), write_shared-free explicit offsets.
 *  Then checks the raw bytes of a few values: big-endian ints and
 *  doubles, a long double as IEEE binary128.
 * read: reads all three back (any MPI, any order of writer) and checks
 *  them; also reads section 1 through "internal" + a byte view to check the
 *  raw bytes, and nonblocking iread_at through "external32".
 * Prints "EXTENT ..." lines (MPI_File_get_type_extent in external32) and
 * "external32 OK". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define INTS 16
#define RECORDS 8
#define DOUBLES 8
/* The layout has room for this many ranks, whatever the job's size, so
 * that a file written by 4 ranks is read by 2. */
#define SLOTS 4

typedef struct {
    int i;
    double d;
    short s;
    char c[3];
    long long ll;
    float f;
    unsigned u;
    signed char sc;
    unsigned short us;
    unsigned long long ull;
    long double ld;
    double _Complex z;
    _Bool b;
    unsigned char uc;
} record;

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int l;
        MPI_Error_string(rc, s, &l);
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, s);
        failures++;
    }
}

static void fail(const char *what, long long at) {
    fprintf(stderr, "rank %d: %s (at %lld)\n", rank, what, at);
    failures++;
}

static MPI_Datatype record_type(void) {
    record r;
    memset(&r, 0, sizeof r);
    int bl[14] = {1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    MPI_Datatype ts[14] = {MPI_INT, MPI_DOUBLE, MPI_SHORT, MPI_CHAR, MPI_LONG_LONG, MPI_FLOAT, MPI_UNSIGNED,
                           MPI_SIGNED_CHAR, MPI_UNSIGNED_SHORT, MPI_UNSIGNED_LONG_LONG, MPI_LONG_DOUBLE,
                           MPI_C_DOUBLE_COMPLEX, MPI_C_BOOL, MPI_UNSIGNED_CHAR};
    MPI_Aint base, d[14];
    MPI_Get_address(&r, &base);
    MPI_Get_address(&r.i, &d[0]);
    MPI_Get_address(&r.d, &d[1]);
    MPI_Get_address(&r.s, &d[2]);
    MPI_Get_address(&r.c, &d[3]);
    MPI_Get_address(&r.ll, &d[4]);
    MPI_Get_address(&r.f, &d[5]);
    MPI_Get_address(&r.u, &d[6]);
    MPI_Get_address(&r.sc, &d[7]);
    MPI_Get_address(&r.us, &d[8]);
    MPI_Get_address(&r.ull, &d[9]);
    MPI_Get_address(&r.ld, &d[10]);
    MPI_Get_address(&r.z, &d[11]);
    MPI_Get_address(&r.b, &d[12]);
    MPI_Get_address(&r.uc, &d[13]);
    for (int k = 0; k < 14; k++) d[k] -= base;
    MPI_Datatype t, resized;
    MPI_Type_create_struct(14, bl, d, ts, &t);
    MPI_Type_create_resized(t, 0, sizeof(record), &resized);
    MPI_Type_free(&t);
    MPI_Type_commit(&resized);
    return resized;
}

static record make_record(int k) {
    record r;
    memset(&r, 0, sizeof r);
    r.i = -1000 * rank - k;
    r.d = 1.5 + rank + k / 8.0;
    r.s = (short)(-300 - k);
    r.c[0] = 'a' + (char)k;
    r.c[1] = 'B';
    r.c[2] = (char)(rank + '0');
    r.ll = -(1LL << 40) - rank * 7 - k;
    r.f = 0.25f * (float)(k + 1);
    r.u = 4000000000u - (unsigned)k;
    r.sc = (signed char)(-5 - k);
    r.us = (unsigned short)(60000 + k);
    r.ull = 0xF000000000000000ULL + (unsigned long long)(rank * 100 + k);
    r.ld = 1.5L + rank + k / 4.0L;
    r.z = (2.0 + k) + (-0.5 - rank) * 1.0i;
    r.b = (k % 2) == 0;
    r.uc = (unsigned char)(200 + k);
    return r;
}

static int same_record(const record *a, const record *b) {
    return a->i == b->i && a->d == b->d && a->s == b->s && !memcmp(a->c, b->c, 3) && a->ll == b->ll && a->f == b->f &&
           a->u == b->u && a->sc == b->sc && a->us == b->us && a->ull == b->ull && a->ld == b->ld && a->z == b->z &&
           a->b == b->b && a->uc == b->uc;
}

/* "weft_swap": 8-byte items reversed (doubles only). */
static int swap_convert(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position, void *extra,
                        int to_file) {
    (void)extra;
    if (datatype != MPI_DOUBLE) return MPI_ERR_TYPE;
    uint8_t *user = (uint8_t *)userbuf + position * 8, *file = filebuf;
    for (int k = 0; k < count; k++)
        for (int b = 0; b < 8; b++) {
            if (to_file) file[8 * k + b] = user[8 * k + 7 - b];
            else user[8 * k + 7 - b] = file[8 * k + b];
        }
    return MPI_SUCCESS;
}
static int swap_read(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position, void *extra) {
    return swap_convert(userbuf, datatype, count, filebuf, position, extra, 0);
}
static int swap_write(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position, void *extra) {
    return swap_convert(userbuf, datatype, count, filebuf, position, extra, 1);
}
static int swap_extent(MPI_Datatype datatype, MPI_Aint *extent, void *extra) {
    (void)extra;
    int size = 0;
    MPI_Type_size(datatype, &size);
    *extent = size;
    return MPI_SUCCESS;
}

static int int_value(int r, int k) { return 0x01020304 + r * 256 + k; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 3) { fprintf(stderr, "usage: external32 PATH write|read\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    int writing = strcmp(argv[2], "write") == 0, weft = strncmp(argv[1], "weft:", 5) == 0;
    /* read: the writer's job size; ranks beyond it find nothing to check. */
    int checked = writing || argc < 4 || rank < atoi(argv[3]);
    check(MPI_Register_datarep("weft_swap", swap_read, swap_write, swap_extent, NULL), "register datarep");
    MPI_File fh;
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], writing ? MPI_MODE_CREATE | MPI_MODE_RDWR : MPI_MODE_RDONLY,
                        MPI_INFO_NULL, &fh), "open");
    MPI_Datatype rec = record_type();
    int record_size = 0;
    MPI_Type_size(rec, &record_size);

    /* Layout, from the file's extents in external32. */
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL), "view external32");
    MPI_Aint int_extent = 0, double_extent = 0, record_extent = 0;
    check(MPI_File_get_type_extent(fh, MPI_INT, &int_extent), "extent int");
    check(MPI_File_get_type_extent(fh, MPI_DOUBLE, &double_extent), "extent double");
    check(MPI_File_get_type_extent(fh, rec, &record_extent), "extent record");
    if (rank == 0) printf("EXTENT int=%ld double=%ld\n", (long)int_extent, (long)double_extent);
    if (record_extent != (MPI_Aint)sizeof(record)) fail("record extent in external32", record_extent);
    if (nprocs > SLOTS) { fprintf(stderr, "at most %d ranks\n", SLOTS); MPI_Abort(MPI_COMM_WORLD, 2); }
    MPI_Offset section1 = 0, section2 = section1 + (MPI_Offset)SLOTS * INTS * int_extent;
    MPI_Offset section3 = section2 + (MPI_Offset)SLOTS * RECORDS * record_size;

    /* 1. ints, interleaved pairs. */
    MPI_Datatype vec, filetype;
    MPI_Type_vector(INTS / 2, 2, 2 * SLOTS, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)2 * SLOTS * int_extent * (INTS / 2), &filetype);
    MPI_Type_commit(&filetype);
    int ints[INTS];
    for (int k = 0; k < INTS; k++) ints[k] = writing ? int_value(rank, k) : 0;
    check(MPI_File_set_view(fh, section1 + rank * 2 * int_extent, MPI_INT, filetype, "external32", MPI_INFO_NULL), "view 1");
    char rep[MPI_MAX_DATAREP_STRING + 1];
    {
        MPI_Offset disp;
        MPI_Datatype e, f;
        MPI_File_get_view(fh, &disp, &e, &f, rep);
        if (strcmp(rep, "external32") != 0) fail("get_view datarep", 0);
        if (e != MPI_INT) fail("get_view etype", 0);
        MPI_Type_free(&f);
    }
    if (writing) check(MPI_File_write_at_all(fh, 0, ints, INTS, MPI_INT, MPI_STATUS_IGNORE), "write ints");
    else {
        MPI_Status st;
        int got = 0;
        check(MPI_File_read_at_all(fh, 0, ints, INTS, MPI_INT, &st), "read ints");
        MPI_Get_count(&st, MPI_INT, &got);
        if (checked && got != INTS) fail("read ints count", got);
        for (int k = 0; checked && k < INTS; k++)
            if (ints[k] != int_value(rank, k)) { fail("int value", k); break; }
        /* nonblocking, same view */
        int again[INTS] = {0};
        MPI_Request request;
        check(MPI_File_iread_at(fh, 0, again, INTS, MPI_INT, &request), "iread_at");
        check(MPI_Wait(&request, &st), "wait iread_at");
        MPI_Get_count(&st, MPI_INT, &got);
        if (checked && (got != INTS || memcmp(again, ints, sizeof ints) != 0)) fail("iread_at data", got);
    }

    /* 2. records, contiguous per rank, from a struct memory type. */
    record records[RECORDS];
    for (int k = 0; k < RECORDS; k++) records[k] = writing ? make_record(k) : (record){0};
    check(MPI_File_set_view(fh, section2 + (MPI_Offset)rank * RECORDS * record_size, MPI_BYTE, MPI_BYTE, "external32",
                            MPI_INFO_NULL), "view 2");
    if (writing) check(MPI_File_write_at(fh, 0, records, RECORDS, rec, MPI_STATUS_IGNORE), "write records");
    if (weft && writing) {
        long longs[2] = {1, 2};
        int rc = MPI_File_write_at(fh, 0, longs, 2, MPI_LONG, MPI_STATUS_IGNORE), class = 0;
        MPI_Error_class(rc, &class);
        if (class != MPI_ERR_UNSUPPORTED_DATAREP) fail("MPI_LONG in external32 not refused", class);
    }
    else {
        check(MPI_File_read_at(fh, 0, records, RECORDS, rec, MPI_STATUS_IGNORE), "read records");
        for (int k = 0; checked && k < RECORDS; k++) {
            record want = make_record(k);
            if (!same_record(&records[k], &want)) { fail("record value", k); break; }
        }
    }

    /* 3. doubles through the registered representation. */
    double doubles[DOUBLES];
    for (int k = 0; k < DOUBLES; k++) doubles[k] = writing ? 3.0 * rank + k / 4.0 : 0.0;
    check(MPI_File_set_view(fh, section3, MPI_DOUBLE, MPI_DOUBLE, "weft_swap", MPI_INFO_NULL), "view 3");
    if (writing) check(MPI_File_write_at(fh, rank * DOUBLES, doubles, DOUBLES, MPI_DOUBLE, MPI_STATUS_IGNORE), "write doubles");
    else {
        check(MPI_File_read_at(fh, rank * DOUBLES, doubles, DOUBLES, MPI_DOUBLE, MPI_STATUS_IGNORE), "read doubles");
        for (int k = 0; checked && k < DOUBLES; k++)
            if (doubles[k] != 3.0 * rank + k / 4.0) { fail("double value", k); break; }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Raw bytes, through "internal" (no conversion): rank 0's first int is
     * at byte 0, big-endian; rank 0's first record starts at section2 with
     * its int, then its double (1.5) big-endian; rank 0's second double of
     * section 3 (0.25) big-endian. */
    if (rank == 0) {
        uint8_t raw[8];
        check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "internal", MPI_INFO_NULL), "view internal");
        MPI_File_read_at(fh, 0, raw, 4, MPI_BYTE, MPI_STATUS_IGNORE);
        if (raw[0] != 1 || raw[1] != 2 || raw[2] != 3 || raw[3] != 4) fail("int not big-endian", 0);
        MPI_File_read_at(fh, section2, raw, 4, MPI_BYTE, MPI_STATUS_IGNORE);
        int32_t be = (int32_t)((uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 | (uint32_t)raw[2] << 8 | raw[3]);
        if (be != 0) fail("record int not big-endian", section2);
        MPI_File_read_at(fh, section2 + 4, raw, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        if (raw[0] != 0x3F || raw[1] != 0xF8 || raw[2] != 0) fail("record double (1.5) not big-endian at +4", section2 + 4);
        /* long double 1.5 as IEEE binary128 at +44 of the packed record:
         * sign/exponent 0x3FFF, then the fraction's leading 1 bit. */
        uint8_t quad[16];
        MPI_File_read_at(fh, section2 + 44, quad, 16, MPI_BYTE, MPI_STATUS_IGNORE);
        if (quad[0] != 0x3F || quad[1] != 0xFF || quad[2] != 0x80 || quad[3] != 0 || quad[15] != 0)
            fail("record long double (1.5) not binary128 big-endian at +44", section2 + 44);
        MPI_File_read_at(fh, section3 + 8, raw, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        if (raw[0] != 0x3F || raw[1] != 0xD0 || raw[2] != 0) fail("swapped double (0.25) not big-endian", section3 + 8);
    } else {
        MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "internal", MPI_INFO_NULL);
    }
    MPI_File_close(&fh);
    MPI_Type_free(&rec);
    MPI_Type_free(&vec);
    MPI_Type_free(&filetype);
    return finish("external32");
}
