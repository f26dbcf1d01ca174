/* HPIO (Ching et al.) through standard MPI-IO: noncontiguous I/O with MPI
 * derived datatypes, the MPI counterpart of `weft bench hpio`.
 *
 *   mpi_hpio --path PATH [options]
 *
 * Layout, for rank p of P, n regions of s bytes spaced g (as in the native
 * version):
 *   contiguous memory    one buffer of n*s bytes (count n*s, MPI_BYTE)
 *   noncontiguous memory region i at i*(s+g) of a buffer of n*(s+g):
 *                        MPI_Type_create_hvector(n, s, s+g, MPI_BYTE)
 *   contiguous file      bytes [p*n*s, (p+1)*n*s): view displacement p*n*s
 *   noncontiguous file   region i at (i*P + p)*(s+g) (ranks interleaved):
 *                        view displacement p*(s+g), file type
 *                        hvector(n, s, (s+g)*P, MPI_BYTE) (or the same as an
 *                        hindexed type with --file-type hindexed)
 * Cases: c-c, nc-c, c-nc, nc-nc (memory-file).
 *
 * Methods:
 *   datatype  one MPI_File_write_at / read_at (or _all with --io collective)
 *             of the whole pattern through the view and memory type;
 *   posix     one MPI_File_write_at / read_at per contiguous region (what a
 *             program without derived datatypes does; independent only).
 *
 * Options (lists are comma-separated; the program runs their product):
 *   --cases c-c,nc-c,c-nc,nc-nc   --methods datatype,posix
 *   --io independent,collective    --region-count N,..  --region-bytes S,..
 *   --spacing G,..                 --file-type vector|hindexed
 *   --hint M   sets the info key weft_io_method=M on the file (datatype,
 *              list, posix, sieve; reported as "hint"; other MPI-IO
 *              implementations ignore it)
 *   --min-seconds T  repeat each operation until T seconds have passed
 *              (default 0.2; at most 1000 times); the time reported is per
 *              operation.
 *
 * Every read is verified byte for byte (untimed). One JSON object per
 * (case, method, io, sizes, phase) on stdout. */
#include "common.h"

#include <getopt.h>

typedef struct {
    const char *path, *cases, *methods, *io, *file_type, *hint;
    long long counts[16], bytes[16], spacings[16];
    int ncounts, nbytes, nspacings;
    double min_seconds;
} args_t;

typedef struct {
    long long n, s, g;
    int mem_nc, file_nc, posix, collective;
} shape_t;

static MPI_Offset file_offset(const shape_t *x, long long i) {
    return x->file_nc ? (MPI_Offset)((i * g_procs + g_rank) * (x->s + x->g)) : (MPI_Offset)(g_rank * x->n * x->s + i * x->s);
}
static long long mem_offset(const shape_t *x, long long i) { return x->mem_nc ? i * (x->s + x->g) : i * x->s; }

/* One write or read of the whole pattern. */
static void operate(MPI_File fh, const shape_t *x, int writing, unsigned char *buf, MPI_Datatype memtype,
                    MPI_Datatype filetype) {
    MPI_Status st;
    if (x->posix) {
        for (long long i = 0; i < x->n; i++) {
            if (writing) MPI_CHECK(MPI_File_write_at(fh, file_offset(x, i), buf + mem_offset(x, i), (int)x->s, MPI_BYTE, &st));
            else MPI_CHECK(MPI_File_read_at(fh, file_offset(x, i), buf + mem_offset(x, i), (int)x->s, MPI_BYTE, &st));
        }
        return;
    }
    (void)filetype;
    int count = x->mem_nc ? 1 : (int)(x->n * x->s);
    MPI_Datatype type = x->mem_nc ? memtype : MPI_BYTE;
    if (writing && x->collective) MPI_CHECK(MPI_File_write_at_all(fh, 0, buf, count, type, &st));
    else if (writing) MPI_CHECK(MPI_File_write_at(fh, 0, buf, count, type, &st));
    else if (x->collective) MPI_CHECK(MPI_File_read_at_all(fh, 0, buf, count, type, &st));
    else MPI_CHECK(MPI_File_read_at(fh, 0, buf, count, type, &st));
    int got = 0;
    MPI_Get_count(&st, type, &got);
    if (got != count) die("%s moved %d of %d items", writing ? "write" : "read", got, count);
}

static void run_one(const args_t *a, const char *case_name, const char *method, const char *io, long long n, long long s,
                    long long g, MPI_Info info) {
    shape_t x = {n, s, g, case_name[0] == 'n', strstr(case_name, "-nc") != NULL, strcmp(method, "posix") == 0,
                 strcmp(io, "collective") == 0};
    if (x.posix && x.collective) return; /* posix is independent only */
    size_t buflen = (size_t)(x.mem_nc ? n * (s + g) : n * s);
    unsigned char *wbuf = malloc(buflen), *rbuf = malloc(buflen);
    if (!wbuf || !rbuf) die("out of memory");
    memset(wbuf, 0xEE, buflen);
    for (long long i = 0; i < n; i++) pattern_fill(wbuf + mem_offset(&x, i), 0, (uint64_t)file_offset(&x, i), (size_t)s);

    MPI_Datatype memtype = MPI_DATATYPE_NULL, filetype = MPI_DATATYPE_NULL;
    if (x.mem_nc) {
        MPI_CHECK(MPI_Type_create_hvector((int)n, (int)s, (MPI_Aint)(s + g), MPI_BYTE, &memtype));
        MPI_CHECK(MPI_Type_commit(&memtype));
    }
    MPI_Offset disp = 0;
    if (!x.posix) {
        if (x.file_nc) {
            disp = (MPI_Offset)(g_rank * (s + g));
            if (strcmp(a->file_type, "hindexed") == 0) {
                int *lens = malloc(sizeof(int) * n);
                MPI_Aint *displs = malloc(sizeof(MPI_Aint) * n);
                for (long long i = 0; i < n; i++) lens[i] = (int)s, displs[i] = (MPI_Aint)(i * g_procs * (s + g));
                MPI_CHECK(MPI_Type_create_hindexed((int)n, lens, displs, MPI_BYTE, &filetype));
                free(lens), free(displs);
            } else {
                MPI_CHECK(MPI_Type_create_hvector((int)n, (int)s, (MPI_Aint)((s + g) * g_procs), MPI_BYTE, &filetype));
            }
            MPI_CHECK(MPI_Type_commit(&filetype));
        } else {
            disp = (MPI_Offset)(g_rank * n * s);
            filetype = MPI_BYTE;
        }
    }

    MPI_File fh;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, a->path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    if (!x.posix) MPI_CHECK(MPI_File_set_view(fh, disp, MPI_BYTE, filetype, "native", info));
    const char *phases[] = {"write", "read"};
    for (int ph = 0; ph < 2; ph++) {
        int writing = ph == 0;
        unsigned char *buf = writing ? wbuf : rbuf;
        double total = 0;
        int reps = 0, stop = 0;
        while (!stop) {
            if (!writing) memset(rbuf, 0, buflen);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            operate(fh, &x, writing, buf, memtype, filetype);
            MPI_Barrier(MPI_COMM_WORLD);
            total += max_all(MPI_Wtime() - t0);
            reps++;
            stop = total >= a->min_seconds || reps >= 1000;
            if (!writing) {
                long long bad = 0;
                for (long long i = 0; i < n; i++)
                    bad += pattern_check(rbuf + mem_offset(&x, i), 0, (uint64_t)file_offset(&x, i), (size_t)s, "hpio read");
                if (sum_all(bad)) die("hpio %s %s %s: read back wrong data", case_name, method, io);
            }
            MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        double seconds = total / reps;
        long long bytes = n * s * g_procs;
        json_t j;
        json_begin(&j, "mpi_hpio");
        json_str(&j, "case", case_name);
        json_str(&j, "method", method);
        json_str(&j, "io", io);
        json_str(&j, "hint", a->hint ? a->hint : "none");
        json_str(&j, "file_type", x.file_nc && !x.posix ? a->file_type : "n/a");
        json_str(&j, "fs", fs_of(a->path));
        json_str(&j, "phase", phases[ph]);
        json_int(&j, "procs", g_procs);
        json_int(&j, "region_count", n);
        json_int(&j, "region_bytes", s);
        json_int(&j, "spacing_bytes", g);
        json_int(&j, "bytes", bytes);
        json_num(&j, "seconds", seconds);
        json_num(&j, "mib_per_s", mib_per_s(bytes, seconds));
        json_end(&j);
    }
    MPI_CHECK(MPI_File_close(&fh));
    if (memtype != MPI_DATATYPE_NULL) MPI_Type_free(&memtype);
    if (filetype != MPI_DATATYPE_NULL && filetype != MPI_BYTE) MPI_Type_free(&filetype);
    free(wbuf), free(rbuf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    args_t a = {NULL, "c-c,nc-c,c-nc,nc-nc", "datatype", "independent,collective", "vector", NULL, {4096}, {8}, {128}, 1, 1, 1, 0.2};
    static struct option opts[] = {
        {"path", 1, 0, 'p'}, {"cases", 1, 0, 'c'}, {"methods", 1, 0, 'm'}, {"io", 1, 0, 'i'},
        {"region-count", 1, 0, 'n'}, {"region-bytes", 1, 0, 's'}, {"spacing", 1, 0, 'g'}, {"file-type", 1, 0, 'f'},
        {"hint", 1, 0, 'h'}, {"min-seconds", 1, 0, 't'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': a.path = optarg; break;
        case 'c': a.cases = optarg; break;
        case 'm': a.methods = optarg; break;
        case 'i': a.io = optarg; break;
        case 'n': a.ncounts = parse_list(optarg, a.counts, 16); break;
        case 's': a.nbytes = parse_list(optarg, a.bytes, 16); break;
        case 'g': a.nspacings = parse_list(optarg, a.spacings, 16); break;
        case 'f': a.file_type = optarg; break;
        case 'h': a.hint = optarg; break;
        case 't': a.min_seconds = atof(optarg); break;
        default: die("unknown option");
        }
    }
    if (!a.path) die("--path is required");
    MPI_Info info = make_info(0, a.hint);
    if (g_rank == 0) MPI_File_delete(a.path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    const char *cases[] = {"c-c", "nc-c", "c-nc", "nc-nc"}, *methods[] = {"datatype", "posix"},
               *ios[] = {"independent", "collective"};
    for (int ic = 0; ic < a.ncounts; ic++)
        for (int ib = 0; ib < a.nbytes; ib++)
            for (int ig = 0; ig < a.nspacings; ig++)
                for (int k = 0; k < 4; k++)
                    for (int m = 0; m < 2; m++)
                        for (int i = 0; i < 2; i++)
                            if (list_has(a.cases, cases[k]) && list_has(a.methods, methods[m]) && list_has(a.io, ios[i]))
                                run_one(&a, cases[k], methods[m], ios[i], a.counts[ic], a.bytes[ib], a.spacings[ig], info);
    if (g_rank == 0) MPI_File_delete(a.path, MPI_INFO_NULL);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
