/* The object cache (issue 14; run by tests/mpi_objects.rs with the hint
 * weft_cache=objects through ROMIO_HINTS, and on a local path by ROMIO).
 *
 * usage: objects PREFIX
 * Writes three files through views, each rank checking what it reads back
 * (before sync: the cache must serve its own writes), and the test
 * compares every file with ROMIO's byte for byte:
 * - PREFIX.private: interleaved blocks (every byte private to one rank),
 *   written by write_all, write_at, write (individual pointer) and a
 *   nonblocking iwrite_at; then set_view to another interleave (twice the
 *   block, shifted) and overwritten in part, then closed.
 * - PREFIX.shared: each rank's tile covers its block and half of the next
 *   rank's (shared objects between neighbours); ranks write in turns
 *   separated by sync-barrier-sync, then each rewrites only the private
 *   half of its block with all ranks at once.
 * - PREFIX.coarse: views with large odd periods (the combined period is
 *   past the bound: one shared object for the overlap),
 *   written in turns.
 * On Weft (the library's weft_mpiio_file_cache_summary is found with
 * dlsym) each rank prints "OBJECTS file=F objects=N coarse=C" after each
 * set_view. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                          \
        }                                                                          \
    } while (0)

#define MPI_OK(call)                                      \
    do {                                                  \
        int rc_ = (call);                                 \
        if (rc_ != MPI_SUCCESS) {                         \
            char text_[MPI_MAX_ERROR_STRING];             \
            int len_ = 0;                                 \
            MPI_Error_string(rc_, text_, &len_);          \
            CHECK(0, "%s: %s", #call, text_);             \
        }                                                 \
    } while (0)

typedef int (*summary_fn)(MPI_File, long long *, int *, long long *);

static void report(MPI_File fh, const char *name) {
    summary_fn summary = (summary_fn)dlsym(RTLD_DEFAULT, "weft_mpiio_file_cache_summary");
    if (!summary) return;
    long long objects = -2, flushes = 0;
    int coarse = -1;
    /* Not a Weft file (the ROMIO run also preloads the library): nothing. */
    if (summary(fh, &objects, &coarse, &flushes) != MPI_SUCCESS) return;
    printf("OBJECTS rank=%d file=%s objects=%lld coarse=%d\n", rank, name, objects, coarse);
    fflush(stdout);
}

/* Bytes with a pattern of (rank, phase, index). */
static void fill(unsigned char *buf, int n, int phase) {
    for (int i = 0; i < n; i++) buf[i] = (unsigned char)(rank * 61 + phase * 17 + i * 7 + 1);
}

static void expect(const unsigned char *got, int n, int phase, const char *what) {
    unsigned char *want = malloc(n);
    fill(want, n, phase);
    for (int i = 0; i < n; i++) CHECK(got[i] == want[i], "%s: byte %d is %d, wrote %d", what, i, got[i], want[i]);
    free(want);
}

/* An interleaved view: blocks of `block` bytes, rank r's at r*block of each size*block period, from `disp`. */
static MPI_Datatype interleave(int block) {
    MPI_Datatype one, tile;
    MPI_Type_contiguous(block, MPI_BYTE, &one);
    MPI_Aint disp = (MPI_Aint)rank * block;
    int len = 1;
    MPI_Datatype at;
    MPI_Type_create_hindexed(1, &len, &disp, one, &at);
    MPI_Type_create_resized(at, 0, (MPI_Aint)size * block, &tile);
    MPI_Type_commit(&tile);
    MPI_Type_free(&one);
    MPI_Type_free(&at);
    return tile;
}

static void private_file(const char *path, MPI_Info info) {
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    const int block = 100, n = 4 * block;
    MPI_Datatype view = interleave(block);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, view, "native", MPI_INFO_NULL));
    report(fh, "private");
    unsigned char *buf = malloc(4 * n), *back = malloc(4 * n);
    fill(buf, 4 * n, 1);
    /* Tiles 0-3 collectively, 4-7 at an explicit offset, 8-11 by the
     * individual pointer, 12-15 nonblocking. */
    MPI_OK(MPI_File_write_all(fh, buf, n, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_write_at(fh, n, buf + n, n, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_seek(fh, 2 * n, MPI_SEEK_SET));
    MPI_OK(MPI_File_write(fh, buf + 2 * n, n, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_Request request;
    MPI_OK(MPI_File_iwrite_at(fh, 3 * n, buf + 3 * n, n, MPI_BYTE, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_read_at(fh, 0, back, 4 * n, MPI_BYTE, MPI_STATUS_IGNORE));
    expect(back, 4 * n, 1, "private read-back before sync");
    MPI_OK(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_OK(MPI_File_sync(fh));
    /* Another interleave: blocks of 150 bytes from byte 50 (rank r's
     * block covers bytes other ranks wrote under the first view). */
    MPI_Type_free(&view);
    view = interleave(150);
    MPI_OK(MPI_File_set_view(fh, 50, MPI_BYTE, view, "native", MPI_INFO_NULL));
    report(fh, "private2");
    fill(buf, 2 * n, 2);
    MPI_OK(MPI_File_write_at_all(fh, 0, buf, 2 * n, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_read_at_all(fh, 0, back, 2 * n, MPI_BYTE, MPI_STATUS_IGNORE));
    expect(back, 2 * n, 2, "private2 read-back");
    MPI_OK(MPI_File_close(&fh));
    MPI_Type_free(&view);
    free(buf);
    free(back);
}

static void shared_file(const char *path, MPI_Info info) {
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    /* Period size*B; rank r covers [r*B, r*B + B + B/2), the last rank only its block. */
    const int B = 64, tiles = 8;
    int mine = rank == size - 1 ? B : B + B / 2;
    MPI_Datatype one, at, view;
    MPI_Type_contiguous(mine, MPI_BYTE, &one);
    MPI_Aint disp = (MPI_Aint)rank * B;
    int len = 1;
    MPI_Type_create_hindexed(1, &len, &disp, one, &at);
    MPI_Type_create_resized(at, 0, (MPI_Aint)size * B, &view);
    MPI_Type_commit(&view);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, view, "native", MPI_INFO_NULL));
    report(fh, "shared");
    int n = mine * tiles;
    unsigned char *buf = malloc(n), *back = malloc(n);
    fill(buf, n, 3);
    for (int turn = 0; turn < size; turn++) {
        if (turn == rank) {
            MPI_OK(MPI_File_write_at(fh, 0, buf, n, MPI_BYTE, MPI_STATUS_IGNORE));
            MPI_OK(MPI_File_read_at(fh, 0, back, n, MPI_BYTE, MPI_STATUS_IGNORE));
            expect(back, n, 3, "shared read-back in turn");
        }
        MPI_OK(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_OK(MPI_File_sync(fh));
    }
    /* The private half of rank r's block (r >= 1; rank 0 all of it)
     * rewritten by everyone at once, through a second view on it only. */
    int from = rank == 0 ? 0 : B / 2, priv = B - from;
    MPI_Datatype pone, pat, pview;
    MPI_Type_contiguous(priv, MPI_BYTE, &pone);
    MPI_Aint pdisp = (MPI_Aint)rank * B + from;
    MPI_Type_create_hindexed(1, &len, &pdisp, pone, &pat);
    MPI_Type_create_resized(pat, 0, (MPI_Aint)size * B, &pview);
    MPI_Type_commit(&pview);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, pview, "native", MPI_INFO_NULL));
    report(fh, "shared2");
    fill(buf, priv * tiles, 4);
    MPI_OK(MPI_File_write_all(fh, buf, priv * tiles, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_close(&fh));
    MPI_Type_free(&one);
    MPI_Type_free(&at);
    MPI_Type_free(&view);
    MPI_Type_free(&pone);
    MPI_Type_free(&pat);
    MPI_Type_free(&pview);
    free(buf);
    free(back);
}

static void coarse_file(const char *path, MPI_Info info) {
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    /* 16 bytes at 8*rank of every period; periods 2^20 + 1 + 2*rank: odd,
     * so any two have a combined period past 2^40 (the map is coarse). */
    const int period = (1 << 20) + 1 + 2 * rank;
    MPI_Datatype one, at, view;
    MPI_Type_contiguous(16, MPI_BYTE, &one);
    MPI_Aint disp = (MPI_Aint)rank * 8;
    int len = 1;
    MPI_Type_create_hindexed(1, &len, &disp, one, &at);
    MPI_Type_create_resized(at, 0, period, &view);
    MPI_Type_commit(&view);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, view, "native", MPI_INFO_NULL));
    report(fh, "coarse");
    const int n = 16 * 4;
    unsigned char *buf = malloc(n), *back = malloc(n);
    fill(buf, n, 5);
    for (int turn = 0; turn < size; turn++) {
        if (turn == rank) {
            MPI_OK(MPI_File_write_at(fh, 0, buf, n, MPI_BYTE, MPI_STATUS_IGNORE));
            MPI_OK(MPI_File_read_at(fh, 0, back, n, MPI_BYTE, MPI_STATUS_IGNORE));
            expect(back, n, 5, "coarse read-back");
        }
        MPI_OK(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_OK(MPI_File_sync(fh));
    }
    MPI_OK(MPI_File_close(&fh));
    MPI_Type_free(&one);
    MPI_Type_free(&at);
    MPI_Type_free(&view);
    free(buf);
    free(back);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 2, "usage: objects PREFIX");
    char path[4096];
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "striping_factor", "4");
    MPI_Info_set(info, "striping_unit", "4096");
    /* ROMIO's write sieving fills holes inside an access's extent with
     * whatever its buffer held past end of file: off, so that holes stay
     * zero on both sides. */
    MPI_Info_set(info, "romio_ds_write", "disable");
    snprintf(path, sizeof path, "%s.private", argv[1]);
    private_file(path, info);
    snprintf(path, sizeof path, "%s.shared", argv[1]);
    shared_file(path, info);
    snprintf(path, sizeof path, "%s.coarse", argv[1]);
    coarse_file(path, info);
    MPI_Info_free(&info);
    if (rank == 0) printf("objects OK\n");
    MPI_Finalize();
    return 0;
}
