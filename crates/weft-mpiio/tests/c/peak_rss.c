/* Peak resident memory of MPI-IO calls, per rank and per phase.
 * usage: peak_rss PATH MIB_PER_RANK [BLOCK_BYTES]
 *
 * Each rank fills a buffer of MIB_PER_RANK MiB, then, per phase, resets
 * its peak RSS (`5` into /proc/self/clear_refs: VmHWM becomes the current
 * RSS, which includes the buffer) and runs one MPI-IO call; the growth of
 * VmHWM over the RSS before the call is what the call cost in memory
 * beyond the user's data. The file view is noncontiguous: blocks of
 * BLOCK_BYTES (default 64 KiB) of each rank interleaved (ior-hard style).
 * Phases:
 *   control         allocate and touch half the buffer's size (shows the
 *                   measurement sees a copy of that size)
 *   write_all       collective write, the default method (datatype)
 *   read_all        collective read back, checked
 *   write_all_2ph   collective write, two-phase (cb_buffer_size default)
 *   read_all_2ph    collective read, two-phase, checked
 *   write_at        independent contiguous write of the whole buffer
 *                   (byte view, every rank its own range)
 *   read_eof        independent read through the noncontiguous view into
 *                   a noncontiguous memory type, half past end of file
 *   write_list      independent write of an eighth of the data through a
 *   read_list       view of FINE-byte blocks (millions of regions), with
 *                   weft_io_method=list; the read checked
 *   write_atomic    the same in atomic mode with weft_lock_method=list
 *   read_atomic     (the lock ranges of every region, then list I/O)
 *                   (the bounce path), checked
 * Prints per rank and phase `PEAK rank=R phase=P grew_kib=G data_kib=D`
 * and "peak_rss OK" when every check passed. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Bytes per block of the list-method phases' view. */
#define FINE 8

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long value = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') { value = atol(line + n + 1); break; }
    if (f) fclose(f);
    return value;
}

static long before_kib;

static void phase_start(void) {
    MPI_Barrier(MPI_COMM_WORLD);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0) { fprintf(stderr, "rank %d: cannot reset VmHWM\n", rank); failures++; }
    if (f) fclose(f);
    before_kib = status_kib("VmRSS");
}

static void phase_end(const char *name, long data_kib) {
    long hwm = status_kib("VmHWM");
    printf("PEAK rank=%d phase=%s grew_kib=%ld data_kib=%ld\n", rank, name, hwm - before_kib, data_kib);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int l;
        MPI_Error_string(rc, s, &l);
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, s);
        failures++;
    }
}

static uint8_t pattern(long long i) { return (uint8_t)(i * 131 + rank * 7 + 1); }

static void verify(const uint8_t *buf, long long n, const char *what) {
    for (long long i = 0; i < n; i++)
        if (buf[i] != pattern(i)) {
            fprintf(stderr, "rank %d: %s: byte %lld is %d, expected %d\n", rank, what, i, buf[i], pattern(i));
            failures++;
            return;
        }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 3) { fprintf(stderr, "usage: peak_rss PATH MIB_PER_RANK [BLOCK_BYTES]\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    long long n = atoll(argv[2]) << 20;
    long long block = argc > 3 ? atoll(argv[3]) : 65536;
    long long blocks = n / block;
    if (blocks * block != n || blocks > INT32_MAX || block > INT32_MAX) { fprintf(stderr, "bad sizes\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    uint8_t *buf = malloc((size_t)n);
    if (!buf) { fprintf(stderr, "no memory\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    long data_kib = (long)(n >> 10);

    MPI_Datatype filetype, block_type;
    MPI_Type_contiguous((int)block, MPI_BYTE, &block_type);
    MPI_Type_commit(&block_type);
    MPI_Type_create_resized(block_type, 0, block * nprocs, &filetype);
    MPI_Type_commit(&filetype);
    MPI_File fh;
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");
    check(MPI_File_set_size(fh, 0), "truncate");

    phase_start();
    {
        long long half = n / 2;
        uint8_t *copy = malloc((size_t)half);
        for (long long i = 0; i < half; i += 4096) copy[i] = (uint8_t)i;
        copy[half - 1] = 1;
        volatile uint8_t sink = copy[half / 2];
        (void)sink;
        free(copy);
    }
    phase_end("control", data_kib);

    const char *methods[2] = {"datatype", "two_phase"};
    const char *names[2][2] = {{"write_all", "read_all"}, {"write_all_2ph", "read_all_2ph"}};
    for (int m = 0; m < 2; m++) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "weft_coll_method", methods[m]);
        MPI_Info_set(info, "romio_cb_write", m ? "enable" : "automatic");
        MPI_Info_set(info, "romio_cb_read", m ? "enable" : "automatic");
        check(MPI_File_set_info(fh, info), "set_info");
        MPI_Info_free(&info);
        check(MPI_File_set_view(fh, rank * block, MPI_BYTE, filetype, "native", MPI_INFO_NULL), "set_view");
        for (long long i = 0; i < n; i++) buf[i] = pattern(i);
        phase_start();
        check(MPI_File_write_at_all(fh, 0, buf, (int)blocks, block_type, MPI_STATUS_IGNORE), names[m][0]);
        phase_end(names[m][0], data_kib);
        memset(buf, 0, (size_t)n);
        phase_start();
        check(MPI_File_read_at_all(fh, 0, buf, (int)blocks, block_type, MPI_STATUS_IGNORE), names[m][1]);
        phase_end(names[m][1], data_kib);
        verify(buf, n, names[m][1]);
    }

    /* Independent contiguous write of the whole buffer, each rank its range. */
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "byte view");
    for (long long i = 0; i < n; i++) buf[i] = pattern(i);
    phase_start();
    check(MPI_File_write_at(fh, (MPI_Offset)rank * n, buf, (int)blocks, block_type, MPI_STATUS_IGNORE), "write_at");
    phase_end("write_at", data_kib);

    /* Read through the interleaved view into a noncontiguous memory type
     * (every block followed by a hole of 64 bytes), starting half-way
     * through the file: half the request lies past end of file. The file
     * holds nprocs * n bytes; the view covers each rank's blocks. */
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_set_view(fh, rank * block, MPI_BYTE, filetype, "native", MPI_INFO_NULL), "set_view 2");
    MPI_Datatype spaced;
    MPI_Type_create_resized(block_type, 0, block + 64, &spaced);
    MPI_Type_commit(&spaced);
    free(buf);
    long long span = blocks * (block + 64);
    uint8_t *sparse = malloc((size_t)span);
    memset(sparse, 0xAA, (size_t)span);
    MPI_Status status;
    phase_start();
    /* The view of each rank holds n bytes of the file (nprocs * n bytes
     * long); from view offset n / 2, half of the n requested bytes exist. */
    check(MPI_File_read_at(fh, n / 2, sparse, (int)blocks, spaced, &status), "read_eof");
    phase_end("read_eof", data_kib);
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if ((long long)got != n / 2) { fprintf(stderr, "rank %d: read_eof: %d bytes, expected %lld\n", rank, got, n / 2); failures++; }
    /* What was read: file bytes of this rank's view from n/2 on. The byte
     * view wrote rank r's pattern at [r n, (r+1) n); the view's stream
     * position p (p in [0, nprocs * n / nprocs)) is file offset
     * (p / block) * block * nprocs + rank * block + p % block. */
    for (long long p = 0; p < n / 2 && failures == 0; p++) {
        long long pos = n / 2 + p;
        long long file = (pos / block) * block * nprocs + rank * block + pos % block;
        long long owner = file / n, i = file % n;
        uint8_t want = (uint8_t)(i * 131 + owner * 7 + 1);
        uint8_t have = sparse[(p / block) * (block + 64) + p % block];
        if (have != want) { fprintf(stderr, "rank %d: read_eof: stream byte %lld is %d, expected %d\n", rank, p, have, want); failures++; }
    }
    for (long long b = n / 2 / block; b < blocks && failures == 0; b++)
        if (sparse[b * (block + 64)] != 0xAA) { fprintf(stderr, "rank %d: read_eof wrote past end of file\n", rank); failures++; }
    free(sparse);
    MPI_Type_free(&spaced);

    /* The list I/O method and the atomic path's list locks over a view of
     * FINE-byte blocks (an eighth of the data: 2 million regions at 128 MiB,
     * whose lists alone would be twice the bound if the library built them
     * whole). */
    long long small = n / 8, pieces = small / FINE;
    uint8_t *fine = malloc((size_t)small);
    MPI_Datatype fine_block, fine_type;
    MPI_Type_contiguous(FINE, MPI_BYTE, &fine_block);
    MPI_Type_create_resized(fine_block, 0, (MPI_Aint)FINE * nprocs, &fine_type);
    MPI_Type_commit(&fine_type);
    MPI_Type_free(&fine_block);
    const char *fine_names[2][2] = {{"write_list", "read_list"}, {"write_atomic", "read_atomic"}};
    for (int atomic = 0; atomic < 2; atomic++) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "weft_io_method", "list");
        MPI_Info_set(info, "weft_lock_method", "list");
        check(MPI_File_set_info(fh, info), "set_info list");
        MPI_Info_free(&info);
        check(MPI_File_set_atomicity(fh, atomic), "set_atomicity");
        check(MPI_File_set_view(fh, (MPI_Offset)rank * FINE, MPI_BYTE, fine_type, "native", MPI_INFO_NULL), "fine view");
        for (long long i = 0; i < small; i++) fine[i] = pattern(i + atomic);
        phase_start();
        check(MPI_File_write_at(fh, 0, fine, (int)small, MPI_BYTE, MPI_STATUS_IGNORE), fine_names[atomic][0]);
        phase_end(fine_names[atomic][0], (long)(small >> 10));
        memset(fine, 0, (size_t)small);
        phase_start();
        check(MPI_File_read_at(fh, 0, fine, (int)small, MPI_BYTE, MPI_STATUS_IGNORE), fine_names[atomic][1]);
        phase_end(fine_names[atomic][1], (long)(small >> 10));
        for (long long i = 0; i < small && failures == 0; i++)
            if (fine[i] != pattern(i + atomic)) {
                fprintf(stderr, "rank %d: %s: byte %lld (of %lld pieces) wrong\n", rank, fine_names[atomic][1], i, pieces);
                failures++;
            }
    }
    check(MPI_File_set_atomicity(fh, 0), "atomicity off");
    free(fine);
    MPI_Type_free(&fine_type);
    MPI_File_close(&fh);
    MPI_Type_free(&filetype);
    MPI_Type_free(&block_type);
    return finish("peak_rss");
}
