/* Datatype decoding checked against MPI itself: for fixed and random
 * nested types, the byte offsets MPI_Pack takes from an offset-tagged
 * buffer must equal Weft's flattening (weft_mpiio_flatten_type, found in
 * the preloaded library with dlsym).
 * usage: typecheck SEED */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES 65536
#define ORIGIN 32768
#define PAIRS_MAX 65536

typedef int (*flatten_fn)(MPI_Datatype, int, int64_t *, int, int *);
static flatten_fn flatten;
static int rank, failures = 0, checked = 0;
static uint8_t low[BUFFER_BYTES], high[BUFFER_BYTES];
static int64_t pairs[2 * PAIRS_MAX];

static void check(MPI_Datatype type, int count, const char *name) {
    MPI_Aint lb, extent, true_lb, true_extent;
    MPI_Type_get_extent(type, &lb, &extent);
    MPI_Type_get_true_extent(type, &true_lb, &true_extent);
    MPI_Aint lo = true_lb + (extent < 0 ? (count - 1) * extent : 0);
    MPI_Aint hi = true_lb + true_extent + (extent > 0 ? (count - 1) * extent : 0);
    if (lo < -ORIGIN || hi > ORIGIN) return; /* outside the tagged buffer */
    int packed_bytes;
    MPI_Pack_size(count, type, MPI_COMM_SELF, &packed_bytes);
    uint8_t *packed_low = malloc(packed_bytes + 1), *packed_high = malloc(packed_bytes + 1);
    int position_low = 0, position_high = 0;
    MPI_Pack(low + ORIGIN, count, type, packed_low, packed_bytes, &position_low, MPI_COMM_SELF);
    MPI_Pack(high + ORIGIN, count, type, packed_high, packed_bytes, &position_high, MPI_COMM_SELF);
    int len = 0, rc = flatten(type, count, pairs, PAIRS_MAX, &len);
    int64_t k = 0, ok = rc == MPI_SUCCESS && len <= PAIRS_MAX;
    for (int p = 0; ok && p < len; p++)
        for (int64_t b = 0; ok && b < pairs[2 * p + 1]; b++, k++) {
            int64_t offset = pairs[2 * p] + b;
            int64_t tagged = k < position_low ? (int64_t)packed_low[k] | ((int64_t)packed_high[k] << 8) : -1;
            if (tagged != offset + ORIGIN) {
                fprintf(stderr, "rank %d: %s: stream byte %lld at offset %lld, MPI_Pack says %lld\n", rank, name,
                        (long long)k, (long long)offset, (long long)(tagged - ORIGIN));
                ok = 0;
            }
        }
    if (ok && k != position_low) {
        fprintf(stderr, "rank %d: %s: Weft flattens %lld bytes, MPI packs %d\n", rank, name, (long long)k, position_low);
        ok = 0;
    }
    if (!ok) { fprintf(stderr, "rank %d: %s failed (rc %d)\n", rank, name, rc); failures++; }
    checked++;
    free(packed_low);
    free(packed_high);
}

static unsigned long long seed_state;
static char recipe[256];
static int random_below(int n) {
    seed_state = seed_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int)((seed_state >> 33) % (unsigned long long)n);
}

/* A random type of depth at most `depth` (the caller frees it). */
static MPI_Datatype random_type(int depth) {
    MPI_Datatype named[] = {MPI_CHAR, MPI_SHORT, MPI_INT, MPI_DOUBLE, MPI_DOUBLE_INT};
    MPI_Datatype child, t, kids[3];
    if (depth == 0) {
        int which = random_below(5);
        MPI_Type_dup(named[which], &t);
        snprintf(recipe + strlen(recipe), sizeof recipe - strlen(recipe), "named%d ", which);
        return t;
    }
    child = random_type(depth - 1);
    int bl[3] = {1 + random_below(3), 1 + random_below(2), 1 + random_below(3)};
    int disp[3] = {random_below(3), 3 + random_below(4), 8 + random_below(5)};
    MPI_Aint adisp[3] = {-16 + random_below(8) * 4, 24 + random_below(8) * 4, 80 + random_below(8) * 8};
    int kind = random_below(9);
    snprintf(recipe + strlen(recipe), sizeof recipe - strlen(recipe), "k%d ", kind);
    switch (kind) {
    case 0: MPI_Type_contiguous(1 + random_below(3), child, &t); break;
    case 1: MPI_Type_vector(1 + random_below(3), bl[0], bl[0] + random_below(3), child, &t); break;
    case 2: MPI_Type_create_hvector(1 + random_below(3), bl[1], 64 + random_below(4) * 8, child, &t); break;
    case 3: MPI_Type_indexed(3, bl, disp, child, &t); break;
    case 4: MPI_Type_create_hindexed(3, bl, adisp, child, &t); break;
    case 5: MPI_Type_create_indexed_block(3, bl[1], disp, child, &t); break;
    case 6: MPI_Type_create_hindexed_block(3, 1, adisp, child, &t); break;
    case 7:
        kids[0] = child;
        kids[1] = MPI_INT;
        kids[2] = MPI_SHORT;
        MPI_Type_create_struct(3, bl, adisp, kids, &t);
        break;
    default: MPI_Type_create_resized(child, -8 + random_below(3) * 4, 200 + random_below(4) * 8, &t); break;
    }
    MPI_Type_free(&child);
    MPI_Type_commit(&t);
    return t;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    flatten = (flatten_fn)dlsym(RTLD_DEFAULT, "weft_mpiio_flatten_type");
    if (!flatten) { fprintf(stderr, "weft_mpiio_flatten_type not found: preload the library\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    for (int i = 0; i < BUFFER_BYTES; i++) { low[i] = (uint8_t)(i & 0xff); high[i] = (uint8_t)(i >> 8); }

    MPI_Datatype vec, hvec, idx, st, rs, dup, sub_c, sub_f, dar, neg, iblk, hblk, three;
    MPI_Type_vector(3, 2, 4, MPI_INT, &vec);
    MPI_Type_create_hvector(2, 1, 40, vec, &hvec);
    int bl[3] = {2, 1, 3}, disp[3] = {0, 5, 9};
    MPI_Type_indexed(3, bl, disp, MPI_SHORT, &idx);
    int sbl[3] = {1, 1, 2};
    MPI_Aint sdisp[3] = {0, 100, 400};
    MPI_Datatype stypes[3] = {MPI_DOUBLE, hvec, idx};
    MPI_Type_create_struct(3, sbl, sdisp, stypes, &st);
    MPI_Type_create_resized(st, -16, 1200, &rs);
    MPI_Type_dup(st, &dup);
    int sizes[3] = {4, 5, 6}, subsizes[3] = {2, 3, 2}, starts[3] = {1, 1, 3};
    MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub_c);
    MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT, &sub_f);
    int gsizes[2] = {9, 10}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psizes[2] = {2, 2};
    MPI_Type_create_darray(4, 1, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_DOUBLE, &dar);
    MPI_Aint ndisp[2] = {-24, 8};
    int nbl[2] = {1, 2};
    MPI_Type_create_hindexed(2, nbl, ndisp, MPI_INT, &neg);
    MPI_Type_create_indexed_block(3, 2, disp, MPI_INT, &iblk);
    MPI_Type_create_hindexed_block(2, 3, ndisp, MPI_SHORT, &hblk);
    MPI_Type_contiguous(3, MPI_DOUBLE_INT, &three);
    MPI_Datatype fixed[] = {vec, hvec, idx, st, rs, dup, sub_c, sub_f, dar, neg, iblk, hblk, three};
    const char *names[] = {"vector", "hvector", "indexed", "struct", "resized", "dup", "subarray_c", "subarray_f",
                           "darray", "negative_hindexed", "indexed_block", "hindexed_block", "double_int"};
    for (int i = 0; i < 13; i++) {
        MPI_Type_commit(&fixed[i]);
        check(fixed[i], 1, names[i]);
        check(fixed[i], 2, names[i]);
    }
    seed_state = argc > 1 ? strtoull(argv[1], NULL, 10) + (unsigned long long)rank : 1;
    for (int i = 0; i < 40; i++) {
        char name[400];
        snprintf(name, sizeof name, "random #%d (seed %s)", i, argc > 1 ? argv[1] : "1");
        recipe[0] = 0;
        MPI_Datatype t = random_type(1 + random_below(3));
        snprintf(name + strlen(name), sizeof name - strlen(name), " [%s]", recipe);
        check(t, 1 + random_below(2), name);
        MPI_Type_free(&t);
    }
    for (int i = 0; i < 13; i++) MPI_Type_free(&fixed[i]);
    int total = 0, all_checked = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&checked, &all_checked, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total == 0 ? "typecheck OK (%d checks)\n" : "typecheck FAILED (%d checks)\n", all_checked);
    MPI_Finalize();
    return total == 0 && all_checked > 0 ? 0 : 1;
}
