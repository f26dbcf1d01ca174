/* IOR-style patterns through standard MPI-IO.
 *
 *   mpi_ior --mode hard|easy|contig --path PATH [options]
 *
 * hard   ior-hard (IO500): one shared file, records of --record bytes
 *        (default 47008) interleaved across ranks: record s of rank r at
 *        (s * P + r) * record, for s < --segments. One call per record:
 *        MPI_File_write_at / read_at (independent) or write_at_all /
 *        read_at_all (collective: every rank one record per call).
 * easy   ior-easy: a file per process (PATH.<rank>, opened on
 *        MPI_COMM_SELF), --block bytes each in --transfer calls (default
 *        2 MiB); independent only.
 * contig large contiguous: one shared file, rank r's --block bytes at
 *        r * block, in --transfer calls (independent or collective).
 *
 * Options: --io independent,collective (default both; easy: independent),
 *   --block SIZE (default 64M), --transfer SIZE (default 2M for easy and
 *   contig), --segments N (hard, default 256), --record BYTES,
 *   --striping-unit BYTES (hint at create; 0 = the file system's default),
 *   --keep (leave the files).
 *
 * Each phase writes then reads back (a new open), and every byte read is
 * verified against the pattern written (outside the timed region). Time =
 * from a barrier before the first call to a barrier after the last one
 * (open and close not timed). One JSON object per (io, phase) on stdout. */
#include "common.h"

#include <getopt.h>

typedef struct {
    const char *mode, *path, *io;
    long long block, transfer, segments, record, striping_unit;
    int keep;
} args_t;

static void parse(int argc, char **argv, args_t *a) {
    static struct option opts[] = {
        {"mode", 1, 0, 'm'}, {"path", 1, 0, 'p'}, {"io", 1, 0, 'i'}, {"block", 1, 0, 'b'},
        {"transfer", 1, 0, 't'}, {"segments", 1, 0, 's'}, {"record", 1, 0, 'r'}, {"striping-unit", 1, 0, 'u'},
        {"keep", 0, 0, 'k'}, {0, 0, 0, 0}};
    *a = (args_t){"hard", NULL, NULL, 64ll << 20, 2ll << 20, 256, 47008, 0, 0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a->mode = optarg; break;
        case 'p': a->path = optarg; break;
        case 'i': a->io = optarg; break;
        case 'b': a->block = parse_size(optarg); break;
        case 't': a->transfer = parse_size(optarg); break;
        case 's': a->segments = parse_size(optarg); break;
        case 'r': a->record = parse_size(optarg); break;
        case 'u': a->striping_unit = parse_size(optarg); break;
        case 'k': a->keep = 1; break;
        default: die("unknown option");
        }
    }
    if (!a->path) die("--path is required");
    if (!a->io) a->io = strcmp(a->mode, "easy") == 0 ? "independent" : "independent,collective";
    if (a->transfer <= 0 || a->block % a->transfer) die("--block must be a multiple of --transfer");
}

static void report(const args_t *a, const char *io, const char *phase, long long bytes, double seconds) {
    json_t j;
    json_begin(&j, "mpi_ior");
    json_str(&j, "pattern", a->mode);
    json_str(&j, "io", io);
    json_str(&j, "fs", fs_of(a->path));
    json_str(&j, "phase", phase);
    json_int(&j, "procs", g_procs);
    if (strcmp(a->mode, "hard") == 0) {
        json_int(&j, "record", a->record);
        json_int(&j, "segments", a->segments);
    } else {
        json_int(&j, "block", a->block);
        json_int(&j, "transfer", a->transfer);
    }
    json_int(&j, "striping_unit", a->striping_unit);
    json_int(&j, "bytes", bytes);
    json_num(&j, "seconds", seconds);
    json_num(&j, "mib_per_s", mib_per_s(bytes, seconds));
    json_end(&j);
}

/* One write or read pass of the hard pattern; returns the slowest rank's seconds. */
static double hard_pass(const args_t *a, int collective, int writing, unsigned char *buf, MPI_Info info) {
    MPI_File fh;
    int amode = writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, a->path, amode, info, &fh));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long long s = 0; s < a->segments; s++) {
        MPI_Offset off = (MPI_Offset)((s * g_procs + g_rank) * a->record);
        unsigned char *p = buf + s * a->record;
        MPI_Status st;
        if (writing && collective) MPI_CHECK(MPI_File_write_at_all(fh, off, p, (int)a->record, MPI_BYTE, &st));
        else if (writing) MPI_CHECK(MPI_File_write_at(fh, off, p, (int)a->record, MPI_BYTE, &st));
        else if (collective) MPI_CHECK(MPI_File_read_at_all(fh, off, p, (int)a->record, MPI_BYTE, &st));
        else MPI_CHECK(MPI_File_read_at(fh, off, p, (int)a->record, MPI_BYTE, &st));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    MPI_CHECK(MPI_File_close(&fh));
    return max_all(t);
}

static void run_hard(const args_t *a, const char *io, MPI_Info info) {
    int collective = strcmp(io, "collective") == 0;
    size_t len = (size_t)(a->segments * a->record);
    unsigned char *wbuf = malloc(len), *rbuf = malloc(len);
    if (!wbuf || !rbuf) die("out of memory");
    for (long long s = 0; s < a->segments; s++)
        pattern_fill(wbuf + s * a->record, 0, (uint64_t)((s * g_procs + g_rank) * a->record), (size_t)a->record);
    memset(rbuf, 0, len);
    if (g_rank == 0) MPI_File_delete(a->path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    long long total = (long long)len * g_procs;
    report(a, io, "write", total, hard_pass(a, collective, 1, wbuf, info));
    double tr = hard_pass(a, collective, 0, rbuf, info);
    long long bad = 0;
    for (long long s = 0; s < a->segments; s++)
        bad += pattern_check(rbuf + s * a->record, 0, (uint64_t)((s * g_procs + g_rank) * a->record), (size_t)a->record, "ior-hard read");
    if (sum_all(bad)) die("ior-hard: read back wrong data");
    report(a, io, "read", total, tr);
    if (!a->keep && g_rank == 0) MPI_File_delete(a->path, MPI_INFO_NULL);
    free(wbuf), free(rbuf);
}

/* easy (file per process) or contig (shared file, rank-contiguous blocks). */
static double block_pass(const args_t *a, int per_process, int collective, int writing, unsigned char *buf, MPI_Info info) {
    char path[4096];
    if (per_process) snprintf(path, sizeof path, "%s.%d", a->path, g_rank);
    else snprintf(path, sizeof path, "%s", a->path);
    MPI_File fh;
    int amode = writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    MPI_CHECK(MPI_File_open(per_process ? MPI_COMM_SELF : MPI_COMM_WORLD, path, amode, info, &fh));
    MPI_Offset base = per_process ? 0 : (MPI_Offset)g_rank * a->block;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long long done = 0; done < a->block; done += a->transfer) {
        MPI_Status st;
        unsigned char *p = buf + done;
        int n = (int)a->transfer;
        if (writing && collective) MPI_CHECK(MPI_File_write_at_all(fh, base + done, p, n, MPI_BYTE, &st));
        else if (writing) MPI_CHECK(MPI_File_write_at(fh, base + done, p, n, MPI_BYTE, &st));
        else if (collective) MPI_CHECK(MPI_File_read_at_all(fh, base + done, p, n, MPI_BYTE, &st));
        else MPI_CHECK(MPI_File_read_at(fh, base + done, p, n, MPI_BYTE, &st));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    MPI_CHECK(MPI_File_close(&fh));
    return max_all(t);
}

static void run_block(const args_t *a, const char *io, MPI_Info info) {
    int per_process = strcmp(a->mode, "easy") == 0, collective = strcmp(io, "collective") == 0;
    uint64_t id = per_process ? (uint64_t)g_rank + 1 : 0, base = per_process ? 0 : (uint64_t)g_rank * (uint64_t)a->block;
    unsigned char *wbuf = malloc((size_t)a->block), *rbuf = malloc((size_t)a->block);
    if (!wbuf || !rbuf) die("out of memory");
    pattern_fill(wbuf, id, base, (size_t)a->block);
    memset(rbuf, 0, (size_t)a->block);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", a->path, g_rank);
    if (per_process) MPI_File_delete(path, MPI_INFO_NULL);
    else if (g_rank == 0) MPI_File_delete(a->path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    long long total = a->block * g_procs;
    report(a, io, "write", total, block_pass(a, per_process, collective, 1, wbuf, info));
    double tr = block_pass(a, per_process, collective, 0, rbuf, info);
    if (sum_all(pattern_check(rbuf, id, base, (size_t)a->block, a->mode))) die("%s: read back wrong data", a->mode);
    report(a, io, "read", total, tr);
    if (!a->keep) {
        if (per_process) MPI_File_delete(path, MPI_INFO_NULL);
        else if (g_rank == 0) MPI_File_delete(a->path, MPI_INFO_NULL);
    }
    free(wbuf), free(rbuf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    args_t a;
    parse(argc, argv, &a);
    MPI_Info info = make_info(a.striping_unit, NULL);
    const char *ios[] = {"independent", "collective"};
    for (int i = 0; i < 2; i++) {
        if (!list_has(a.io, ios[i])) continue;
        if (strcmp(a.mode, "hard") == 0) run_hard(&a, ios[i], info);
        else if (strcmp(a.mode, "easy") == 0 || strcmp(a.mode, "contig") == 0) run_block(&a, ios[i], info);
        else die("unknown --mode %s", a.mode);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
