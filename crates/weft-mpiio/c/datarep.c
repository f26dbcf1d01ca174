/* Data representations of Weft files (MPI-3.1 13.5): "native",
 * "internal" (the same bytes as native here), "external32", and those
 * registered with MPI_Register_datarep.
 *
 * Conversion happens on the client, in this layer; the servers store the
 * file's representation. A write packs the user's data into the file
 * representation (external32: MPI_Pack, then Weft's own conversion of
 * each element, see below; a registered one: its write conversion
 * function over the whole request, position 0) and writes those bytes
 * through the view as MPI_BYTE; a read reads bytes and converts and
 * unpacks the whole instances that came back. The temporary buffer is as
 * large as the request (at most 2 GiB: MPI_Pack counts in int):
 * conversion costs one copy of the data (the bounded windows of issue 25
 * hold for "native").
 *
 * File extents: views, etypes and MPI_File_get_type_extent use the file
 * representation's sizes. Weft supports the predefined types whose
 * external32 size is their native size (on x86-64 Linux all but MPI_LONG
 * and MPI_UNSIGNED_LONG, 4 bytes in external32, and what is built of
 * them), so the native layout holds; this is checked per access and per
 * view (each predefined type of the construction packed once), and a type
 * for which it does not hold, or a registered representation whose extent
 * function answers another size than the native one for a predefined type
 * used, is MPI_ERR_UNSUPPORTED_DATAREP rather than misplaced data.
 *
 * Nonblocking calls on a converted file complete at start (MPI allows it):
 * they run the blocking path and return an already complete request. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "weft_mpiio.h"
#include "weft_mpiio_internal.h"

/* Registered representations (MPI_Register_datarep): never unregistered. */
typedef struct weft_datarep {
    char name[MPI_MAX_DATAREP_STRING + 1];
    MPI_Datarep_conversion_function *read_fn, *write_fn;
    MPI_Datarep_extent_function *extent_fn;
    void *extra;
    struct weft_datarep *next;
} weft_datarep;

static pthread_mutex_t weft_datareps_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_datarep *weft_datareps = NULL;

static weft_datarep *weft_datarep_find(const char *name) {
    weft_datarep *found = NULL;
    pthread_mutex_lock(&weft_datareps_lock);
    for (weft_datarep *d = weft_datareps; d; d = d->next)
        if (strcmp(d->name, name) == 0) { found = d; break; }
    pthread_mutex_unlock(&weft_datareps_lock);
    return found;
}

/* Weft keeps the functions for Weft files. */
int MPI_Register_datarep(const char *datarep, MPI_Datarep_conversion_function *read_conversion_fn,
                         MPI_Datarep_conversion_function *write_conversion_fn,
                         MPI_Datarep_extent_function *dtype_file_extent_fn, void *extra_state) {
    if (!datarep || strlen(datarep) > MPI_MAX_DATAREP_STRING || !dtype_file_extent_fn) return MPI_ERR_ARG;
    if (!strcmp(datarep, "native") || !strcmp(datarep, "internal") || !strcmp(datarep, "external32") ||
        weft_datarep_find(datarep))
        return MPI_ERR_DUP_DATAREP;
    /* Registered with the MPI library too, for its own files; MPICH 4.0's
     * ROMIO refuses conversion functions ("not supported by MPI-IO"):
     * that does not concern Weft files. */
    (void)PMPI_Register_datarep(datarep, read_conversion_fn, write_conversion_fn, dtype_file_extent_fn, extra_state);
    weft_datarep *d = calloc(1, sizeof *d);
    if (!d) return MPI_ERR_NO_MEM;
    strcpy(d->name, datarep);
    d->read_fn = read_conversion_fn;
    d->write_fn = write_conversion_fn;
    d->extent_fn = dtype_file_extent_fn;
    d->extra = extra_state;
    pthread_mutex_lock(&weft_datareps_lock);
    d->next = weft_datareps;
    weft_datareps = d;
    pthread_mutex_unlock(&weft_datareps_lock);
    return MPI_SUCCESS;
}

static int weft_is_named(MPI_Datatype type) {
    int ni = 0, na = 0, nd = 0, combiner = 0;
    PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    return combiner == MPI_COMBINER_NAMED;
}

/* Calls `check(predefined, arg)` for every predefined type in `type`'s
 * construction (bounded depth); the first non-success result is returned. */
static int weft_each_predefined(MPI_Datatype type, int depth, int (*check)(MPI_Datatype, void *), void *arg) {
    int ni = 0, na = 0, nd = 0, combiner = 0;
    if (depth > 64) return MPI_ERR_TYPE;
    PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    if (combiner == MPI_COMBINER_NAMED) return check(type, arg);
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int rc = ints && addrs && types ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS) rc = PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, types);
    for (int k = 0; rc == MPI_SUCCESS && k < nd; k++) rc = weft_each_predefined(types[k], depth + 1, check, arg);
    for (int k = 0; k < nd && types; k++)
        if (!weft_is_named(types[k])) PMPI_Type_free(&types[k]);
    free(ints);
    free(addrs);
    free(types);
    return rc;
}

static int weft_extent_matches(MPI_Datatype predefined, void *arg) {
    weft_datarep *d = arg;
    MPI_Aint file_extent = 0;
    int native = 0;
    if (d->extent_fn(predefined, &file_extent, d->extra) != MPI_SUCCESS) return MPI_ERR_CONVERSION;
    PMPI_Type_size(predefined, &native);
    return file_extent == native ? MPI_SUCCESS : MPI_ERR_UNSUPPORTED_DATAREP;
}

/* Whether `predefined` has its native size in external32 (MPI-3.1
 * Table 13.2): all but MPI_LONG, MPI_UNSIGNED_LONG (4 bytes), MPI_WCHAR
 * (2) and MPI_LONG_INT on LP64. (Not asked of the MPI library: OpenMPI
 * 4.1's MPI_Pack_external_size answers 8 for MPI_LONG and packs 4.) */
static int weft_external32_matches(MPI_Datatype predefined, void *arg) {
    (void)arg;
    int native = 0;
    PMPI_Type_size(predefined, &native);
    if (predefined == MPI_LONG || predefined == MPI_UNSIGNED_LONG || predefined == MPI_LONG_INT ||
        predefined == MPI_WCHAR)
        return native == 4 ? MPI_SUCCESS : MPI_ERR_UNSUPPORTED_DATAREP;
    return MPI_SUCCESS;
}

/* ---------- external32 conversion (Weft's own: MPICH 4.0's
 * MPI_Pack_external traps on structs of mixed types) ----------
 *
 * The user's data is packed natively (MPI_Pack: the type signature's
 * elements back to back), then each element is converted in place, in
 * signature order: integers and IEEE floats are byte-reversed (native x86-64
 * is little-endian, external32 big-endian), long double goes from the x87
 * 80-bit format to IEEE binary128, complex types are two such parts, and
 * the predefined pair types (MPI_DOUBLE_INT, ...) their two members. The
 * signature is walked from the type's construction: a combiner with one
 * child repeats the child's signature size(type)/size(child) times; a
 * struct concatenates its members' signatures. Reads convert back, then
 * MPI_Unpack. */

/* x87 extended (16 bytes, little-endian) <-> binary128 (16 bytes, big-endian). */
static void weft_long_double_to_external(uint8_t *p) {
    uint64_t mantissa;
    uint16_t sign_exponent;
    memcpy(&mantissa, p, 8);
    memcpy(&sign_exponent, p + 8, 2);
    /* binary128: sign and exponent (16 bits), then the 112-bit fraction:
     * the x87 mantissa without its explicit integer bit, left-aligned. */
    uint64_t fraction = mantissa << 1; /* 63 fraction bits, left-aligned in 64 */
    uint8_t out[16] = {0};
    out[0] = (uint8_t)(sign_exponent >> 8);
    out[1] = (uint8_t)sign_exponent;
    for (int k = 0; k < 8; k++) out[2 + k] = (uint8_t)(fraction >> (56 - 8 * k));
    memcpy(p, out, 16);
}

static void weft_long_double_from_external(uint8_t *p) {
    uint16_t sign_exponent = (uint16_t)(p[0] << 8 | p[1]);
    uint64_t fraction = 0;
    for (int k = 0; k < 8; k++) fraction = fraction << 8 | p[2 + k];
    uint64_t mantissa = fraction >> 1;
    if ((sign_exponent & 0x7FFF) != 0) mantissa |= 1ULL << 63; /* normal, infinity, NaN */
    memset(p, 0, 16);
    memcpy(p, &mantissa, 8);
    memcpy(p + 8, &sign_exponent, 2);
}

static void weft_reverse(uint8_t *p, int n) {
    for (int a = 0, b = n - 1; a < b; a++, b--) {
        uint8_t t = p[a];
        p[a] = p[b];
        p[b] = t;
    }
}

/* Converts `n` elements of the predefined type `t` at *p and advances *p. */
static int weft_convert_named(MPI_Datatype t, long long n, uint8_t **p, uint8_t *end, int to_external) {
    int size = 0;
    PMPI_Type_size(t, &size);
    if (size <= 0) return MPI_SUCCESS;
    if ((long long)(end - *p) < n * size) return MPI_ERR_CONVERSION;
    /* Pairs: two members. */
    MPI_Datatype first = MPI_DATATYPE_NULL, second = MPI_INT;
    if (t == MPI_FLOAT_INT) first = MPI_FLOAT;
    else if (t == MPI_DOUBLE_INT) first = MPI_DOUBLE;
    else if (t == MPI_LONG_INT) first = MPI_LONG;
    else if (t == MPI_2INT) first = MPI_INT;
    else if (t == MPI_SHORT_INT) first = MPI_SHORT;
    else if (t == MPI_LONG_DOUBLE_INT) first = MPI_LONG_DOUBLE;
    if (first != MPI_DATATYPE_NULL) {
        for (long long k = 0; k < n; k++) {
            int rc = weft_convert_named(first, 1, p, end, to_external);
            if (rc == MPI_SUCCESS) rc = weft_convert_named(second, 1, p, end, to_external);
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    }
    int long_double = t == MPI_LONG_DOUBLE || t == MPI_C_LONG_DOUBLE_COMPLEX;
    int complex = t == MPI_C_FLOAT_COMPLEX || t == MPI_C_DOUBLE_COMPLEX || t == MPI_C_LONG_DOUBLE_COMPLEX ||
                  t == MPI_COMPLEX || t == MPI_DOUBLE_COMPLEX;
    int part = complex ? size / 2 : size;
    if (long_double ? part != 16 : part > 8) return MPI_ERR_UNSUPPORTED_DATAREP;
    long long parts = n * (complex ? 2 : 1);
    for (long long k = 0; k < parts; k++, *p += part) {
        if (!long_double) weft_reverse(*p, part);
        else if (to_external) weft_long_double_to_external(*p);
        else weft_long_double_from_external(*p);
    }
    return MPI_SUCCESS;
}

/* Converts `n` instances of `type`'s signature at *p (bounded depth). */
static int weft_convert(MPI_Datatype type, long long n, uint8_t **p, uint8_t *end, int to_external, int depth) {
    int ni = 0, na = 0, nd = 0, combiner = 0;
    if (depth > 64) return MPI_ERR_TYPE;
    if (n == 0) return MPI_SUCCESS;
    PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    if (combiner == MPI_COMBINER_NAMED) return weft_convert_named(type, n, p, end, to_external);
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int rc = ints && addrs && types ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS) rc = PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, types);
    if (rc == MPI_SUCCESS && combiner == MPI_COMBINER_STRUCT) {
        /* ints: count, blocklengths[count]; types[count] */
        for (long long k = 0; rc == MPI_SUCCESS && k < n; k++)
            for (int m = 0; rc == MPI_SUCCESS && m < ints[0]; m++)
                rc = weft_convert(types[m], ints[1 + m], p, end, to_external, depth + 1);
    } else if (rc == MPI_SUCCESS && nd >= 1) {
        MPI_Count whole = 0, child = 0;
        PMPI_Type_size_x(type, &whole);
        PMPI_Type_size_x(types[0], &child);
        if (child > 0) rc = weft_convert(types[0], n * (long long)(whole / child), p, end, to_external, depth + 1);
    }
    for (int k = 0; k < nd && types && rc != MPI_ERR_NO_MEM; k++)
        if (!weft_is_named(types[k])) PMPI_Type_free(&types[k]);
    free(ints);
    free(addrs);
    free(types);
    return rc;
}

/* Checks that `type` occupies in `datarep` what it occupies natively. */
static int weft_datarep_layout(int datarep, weft_datarep *user, MPI_Datatype type) {
    if (datarep == WEFT_DATAREP_EXTERNAL32) return weft_each_predefined(type, 0, weft_external32_matches, NULL);
    if (datarep == WEFT_DATAREP_USER) return weft_each_predefined(type, 0, weft_extent_matches, user);
    return MPI_SUCCESS;
}

int weft_datarep_of(const char *name, int *datarep, void **user) {
    *user = NULL;
    if (!name) return MPI_ERR_UNSUPPORTED_DATAREP;
    if (!strcmp(name, "native")) *datarep = WEFT_DATAREP_NATIVE;
    else if (!strcmp(name, "internal")) *datarep = WEFT_DATAREP_INTERNAL;
    else if (!strcmp(name, "external32")) *datarep = WEFT_DATAREP_EXTERNAL32;
    else if ((*user = weft_datarep_find(name)) != NULL) *datarep = WEFT_DATAREP_USER;
    else return MPI_ERR_UNSUPPORTED_DATAREP;
    return MPI_SUCCESS;
}

const char *weft_datarep_name(const weft_file *file) {
    switch (file->datarep) {
    case WEFT_DATAREP_INTERNAL: return "internal";
    case WEFT_DATAREP_EXTERNAL32: return "external32";
    case WEFT_DATAREP_USER: return ((weft_datarep *)file->datarep_user)->name;
    default: return "native";
    }
}

int weft_datarep_check_view(int datarep, void *user, MPI_Datatype etype, MPI_Datatype filetype) {
    int rc = weft_datarep_layout(datarep, user, etype);
    if (rc == MPI_SUCCESS) rc = weft_datarep_layout(datarep, user, filetype);
    return rc;
}

int weft_datarep_type_extent(const weft_file *file, MPI_Datatype type, MPI_Count *extent) {
    MPI_Count lb = 0;
    int rc = weft_datarep_layout(file->datarep, file->datarep_user, type);
    if (rc == MPI_SUCCESS) rc = PMPI_Type_get_extent_x(type, &lb, extent);
    return rc;
}

int weft_datarep_move(weft_file *file, int write, int explicit_offset, MPI_Offset offset, const void *buf,
                      long long count, MPI_Datatype datatype, int collective, int64_t *bytes) {
    *bytes = 0;
    if (file->datarep == WEFT_DATAREP_NATIVE || file->datarep == WEFT_DATAREP_INTERNAL)
        return weft_move(file, write, explicit_offset, offset, buf, count, datatype, collective, bytes);
    weft_datarep *user = file->datarep_user;
    MPI_Count size = 0;
    int rc = count < 0 || count > INT32_MAX ? MPI_ERR_COUNT : PMPI_Type_size_x(datatype, &size);
    if (rc == MPI_SUCCESS && count * (long long)size > INT32_MAX) rc = MPI_ERR_COUNT; /* MPI_Pack's int sizes */
    if (rc == MPI_SUCCESS) rc = weft_datarep_layout(file->datarep, user, datatype);
    if (rc == MPI_SUCCESS && file->datarep == WEFT_DATAREP_USER && !(write ? user->write_fn : user->read_fn))
        rc = MPI_ERR_CONVERSION;
    long long packed = count * (long long)size;
    void *tmp = NULL;
    if (rc == MPI_SUCCESS && packed > 0 && !(tmp = malloc((size_t)packed))) rc = MPI_ERR_NO_MEM;
    /* Basic elements of the request (registered conversions count in them). */
    MPI_Count elements = 0;
    if (rc == MPI_SUCCESS && file->datarep == WEFT_DATAREP_USER && packed > 0) {
        MPI_Status st;
        PMPI_Status_set_elements_x(&st, MPI_BYTE, (MPI_Count)packed);
        PMPI_Get_elements_x(&st, datatype, &elements);
        if (elements > INT32_MAX) rc = MPI_ERR_COUNT;
    }
    if (rc == MPI_SUCCESS && write && packed > 0) {
        if (file->datarep == WEFT_DATAREP_EXTERNAL32) {
            int position = 0;
            uint8_t *at = tmp;
            rc = PMPI_Pack(buf, (int)count, datatype, tmp, (int)packed, &position, MPI_COMM_SELF);
            if (rc == MPI_SUCCESS && position != packed) rc = MPI_ERR_CONVERSION;
            if (rc == MPI_SUCCESS) rc = weft_convert(datatype, count, &at, (uint8_t *)tmp + packed, 1, 0);
        } else if (user->write_fn((void *)buf, datatype, (int)elements, tmp, 0, user->extra) != MPI_SUCCESS) {
            rc = MPI_ERR_CONVERSION;
        }
    }
    if (rc != MPI_SUCCESS) {
        /* A collective still takes part (with nothing), so that the other
         * ranks are not left waiting. */
        if (collective) {
            int64_t ignored = 0;
            weft_move(file, write, explicit_offset, offset, NULL, 0, MPI_BYTE, collective, &ignored);
        }
        free(tmp);
        return rc;
    }
    int64_t moved = 0;
    rc = weft_move(file, write, explicit_offset, offset, tmp, packed, MPI_BYTE, collective, &moved);
    if (rc == MPI_SUCCESS && !write && moved > 0) {
        /* Whole instances only (the rest of a partial one stays untouched). */
        long long instances = size > 0 ? moved / size : 0;
        if (file->datarep == WEFT_DATAREP_EXTERNAL32) {
            int position = 0;
            uint8_t *at = tmp;
            if (instances > 0) rc = weft_convert(datatype, instances, &at, (uint8_t *)tmp + instances * size, 0, 0);
            if (rc == MPI_SUCCESS && instances > 0)
                rc = PMPI_Unpack(tmp, (int)(instances * size), &position, (void *)buf, (int)instances, datatype,
                                 MPI_COMM_SELF);
        } else if (instances > 0) {
            MPI_Status st;
            MPI_Count done = 0;
            PMPI_Status_set_elements_x(&st, MPI_BYTE, (MPI_Count)(instances * size));
            PMPI_Get_elements_x(&st, datatype, &done);
            if (user->read_fn((void *)buf, datatype, (int)done, tmp, 0, user->extra) != MPI_SUCCESS)
                rc = MPI_ERR_CONVERSION;
        }
    }
    free(tmp);
    *bytes = rc == MPI_SUCCESS ? moved : 0;
    return rc;
}
