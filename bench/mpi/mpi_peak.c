/* Peak resident memory of a noncontiguous collective write and read
 * (issue 25): each rank writes then reads back --size bytes through an
 * interleaved view (blocks of --block bytes of every rank in turn, as
 * ior-hard), from and into a noncontiguous memory type (each block
 * followed by a 64-byte hole, as simulation arrays with ghost cells), with
 * MPI_File_write_at_all / MPI_File_read_at_all in --calls calls.
 *
 * usage: mpi_peak --path P [--size 1G] [--block 1M] [--calls 1]
 *                 [--method datatype|two_phase]
 * Prints one JSON line per rank and phase: the user data (the buffer's
 * span), VmHWM (peak RSS since the process started, which includes the
 * buffer) after the phase, the peak growth during the phase alone (VmHWM
 * reset through /proc/self/clear_refs before it, minus the RSS at its
 * start), and the bandwidth of the phase (slowest rank's time). The read
 * is verified afterwards (data and untouched holes). */
#include <time.h>
#include "common.h"

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

static void reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) { fputs("5", f); fclose(f); }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    const char *path = NULL, *method = "datatype";
    long long size = 1LL << 30, block = 1 << 20, calls = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--path")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--size")) size = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--block")) block = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls")) calls = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--method")) method = argv[i + 1];
        else die("unknown option %s", argv[i]);
    }
    if (!path) die("--path is required");
    long long blocks = size / block, per_call = blocks / calls;
    if (blocks * block != size || per_call * calls != blocks || block > (1LL << 30)) die("--size must be --calls x k x --block");
    const long long hole = 64, stride = block + hole;
    size_t span = (size_t)(blocks * stride);
    uint8_t *buf = malloc(span);
    if (!buf) die("out of memory (%zu bytes)", span);
    /* Every page resident (the user's data): blocks hold a pattern, holes 0x5A. */
    memset(buf, 0x5A, span);
    for (long long b = 0; b < blocks; b++)
        for (long long i = 0; i < block; i++) buf[b * stride + i] = (uint8_t)(i * 7 + b * 13 + g_rank);

    MPI_Datatype block_type, filetype, memtype;
    MPI_CHECK(MPI_Type_contiguous((int)block, MPI_BYTE, &block_type));
    MPI_CHECK(MPI_Type_create_resized(block_type, 0, block * g_procs, &filetype));
    MPI_CHECK(MPI_Type_create_resized(block_type, 0, stride, &memtype));
    MPI_CHECK(MPI_Type_commit(&filetype));
    MPI_CHECK(MPI_Type_commit(&memtype));
    MPI_Info info;
    MPI_Info_create(&info);
    if (!strcmp(method, "two_phase")) {
        MPI_Info_set(info, "weft_coll_method", "two_phase");
        MPI_Info_set(info, "romio_cb_write", "enable");
        MPI_Info_set(info, "romio_cb_read", "enable");
    }
    MPI_File fh;
    if (g_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    MPI_CHECK(MPI_File_set_view(fh, g_rank * block, MPI_BYTE, filetype, "native", MPI_INFO_NULL));
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1)
            for (long long b = 0; b < blocks; b++) memset(buf + b * stride, 0, (size_t)block);
        MPI_Barrier(MPI_COMM_WORLD);
        reset_peak();
        long before = status_kib("VmRSS");
        double t0 = now();
        for (long long c = 0; c < calls; c++) {
            MPI_Offset at = c * per_call * block;
            uint8_t *from = buf + c * per_call * stride;
            if (phase == 0) MPI_CHECK(MPI_File_write_at_all(fh, at, from, (int)per_call, memtype, MPI_STATUS_IGNORE));
            else MPI_CHECK(MPI_File_read_at_all(fh, at, from, (int)per_call, memtype, MPI_STATUS_IGNORE));
        }
        if (phase == 0) MPI_CHECK(MPI_File_sync(fh));
        double mine = now() - t0, slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        long hwm = status_kib("VmHWM");
        printf("{\"bench\":\"mpi_peak\",\"fs\":\"%s\",\"method\":\"%s\",\"phase\":\"%s\",\"procs\":%d,\"rank\":%d,"
               "\"size_mib\":%lld,\"block_bytes\":%lld,\"calls\":%lld,\"user_mib\":%.1f,\"peak_rss_mib\":%.1f,"
               "\"phase_growth_mib\":%.1f,\"mib_per_s\":%.1f}\n",
               fs_of(path), strcmp(fs_of(path), "weft") ? "romio" : method, phase ? "read" : "write", g_procs, g_rank,
               size >> 20, block, calls, span / 1048576.0, hwm / 1024.0, (hwm - before) / 1024.0,
               (double)size * g_procs / 1048576.0 / slowest);
        fflush(stdout);
    }
    /* The read gave back what was written; holes untouched (not timed). */
    for (long long b = 0; b < blocks; b++) {
        for (long long i = 0; i < block; i++)
            if (buf[b * stride + i] != (uint8_t)(i * 7 + b * 13 + g_rank)) die("block %lld byte %lld differs", b, i);
        for (long long i = block; i < stride; i++)
            if (buf[b * stride + i] != 0x5A) die("hole after block %lld written", b);
    }
    MPI_CHECK(MPI_File_close(&fh));
    if (g_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Type_free(&block_type);
    MPI_Type_free(&filetype);
    MPI_Type_free(&memtype);
    free(buf);
    MPI_Finalize();
    return 0;
}
