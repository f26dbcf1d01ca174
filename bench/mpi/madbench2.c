/* MADbench2 in I/O mode (Borrill et al.), rewritten from the paper and the
 * digest (/work/shared/papers/notes/madbench2-digest.md), with verified
 * data, printed bandwidths and non-square process counts.
 *
 *   madbench2 NPIX NBIN NOGANG SBLOCKSIZE FBLOCKSIZE RMOD WMOD [PREFIX]
 *
 * Environment (as the original): IOMETHOD = POSIX | MPI, IOMODE = SYNC |
 * ASYNC | NONE, FILETYPE = UNIQUE | SHARED, BWEXP = alpha (busy work of
 * (NPIX^2)^alpha flops per call instead of the step's natural NPIX^e).
 *
 * Files: PREFIX "data_<rank>" (UNIQUE) or PREFIX "data" (SHARED); PREFIX
 * defaults to "files/" and may be a weft: path with MPI ("weft:/mad."),
 * or, with POSIX, a directory of the FUSE mount or of a local disk.
 *
 * What it does (digest §2.4-2.8): each of NBIN matrices of NPIX x NPIX
 * doubles is split over a pr x pc process grid (pr = the largest divisor
 * of P not above sqrt(P): P need not be square) in SBLOCKSIZE blocks
 * (block-cyclic share from numroc). Every call moves one process's whole
 * share (one contiguous call). Slots are the largest share rounded up to
 * FBLOCKSIZE; matrix k of rank r is at k*slot (UNIQUE) or (r*NBIN+k)*slot
 * (SHARED).
 *   S: {compute dS_b (busy work, exponent 2), write slot b} x NBIN
 *   W: r0 | r1 c0 w0 | ... | c(B-1) w(B-1): read slot b, busy work
 *      (exponent 3) on bin b-1, write W_(b-1) over slot b-1 in place
 *   C: {read slot b, busy work (exponent 2) on the previous} x NBIN
 * SYNC: blocking MPI_File_read/write after MPI_File_seek (or pread/pwrite);
 * every I/O call bracketed by barriers. ASYNC (MPI only): MPI_File_iread /
 * iwrite and MPI_Wait at the resync points, which barriers bracket; the
 * I/O timers then count only the foreground (posting + waiting). If the
 * MPI-IO library answers MPI_ERR_UNSUPPORTED_OPERATION to iread/iwrite
 * (probed with zero-length calls after opening), the run prints one JSON
 * object with "status":"unsupported" and exits 0. POSIX + ASYNC is
 * reported unsupported as well (the original moves no data then).
 * RMOD/WMOD: ranks in consecutive groups of RMOD (WMOD) pass a token, so
 * P/RMOD (P/WMOD) read (write) at once.
 * NOGANG: ranks form NOGANG gangs of P/NOGANG; as in the original I/O
 * mode the gang remap is dropped, so every process still moves its share
 * of every bin; in W and C gang g does the busy work of the bins
 * b = g (mod NOGANG), divided over its P/NOGANG processes and bracketed by
 * barriers of the gang communicator.
 * Data: element i of rank r's share of bin b holds a distinct integer
 * value (different for dS and W); every read is verified (untimed).
 *
 * Output: one JSON object per (step, op) on stdout: seconds = the slowest
 * rank's I/O time (foreground time in ASYNC), mib_per_s = bytes of all
 * ranks / seconds (in ASYNC: the effective aggregate asynchronous rate,
 * EAAR); op "busy" and "total" give those timers. Rank 0 also prints the
 * original's "<step>_<timer> mean [min:max]" lines to stderr. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

enum { T_R, T_W, T_BW, T_TOTAL, NTIMERS };
static const char *timer_names[NTIMERS] = {"r", "w", "bw", "total"};

static long npix, nbin, nogang, sblock, fblock, rmod, wmod;
static const char *prefix = "files/", *iomethod, *iomode, *filetype;
static double bwexp = -1;
static int use_mpi, async_io, no_io, shared;
static long long local_n, slot_bytes;
static MPI_Comm gang_comm;
static int gang, gang_size;
static MPI_File fh = MPI_FILE_NULL;
static int fd = -1;
static double timers[NTIMERS];
static double *mat, *rbuf, *wbuf, *scratch;
static MPI_Request rreq = MPI_REQUEST_NULL, wreq = MPI_REQUEST_NULL;

static long numroc(long n, long nb, long iproc, long nprocs) {
    long nblocks = n / nb, num = (nblocks / nprocs) * nb, extra = nblocks % nprocs;
    if (iproc < extra) num += nb;
    else if (iproc == extra) num += n % nb;
    return num;
}

static double value(int kind, long b, long i) { return (double)kind * 1e15 + (double)b * 1e12 + (double)g_rank * 1e9 + (double)i; }

static void fill(int kind, long b) {
    for (long long i = 0; i < local_n; i++) mat[i] = value(kind, b, (long)i);
}

static long long verify(const double *buf, int kind, long b, const char *what) {
    long long bad = 0;
    for (long long i = 0; i < local_n; i++)
        if (buf[i] != value(kind, b, (long)i)) {
            if (!bad) fprintf(stderr, "rank %d: %s bin %ld element %lld: %.17g, expected %.17g\n", g_rank, what, b, i, buf[i], value(kind, b, (long)i));
            bad++;
        }
    return bad;
}

/* Busy work standing in for the linear algebra: X^e flops (or
 * (NPIX^2)^BWEXP) divided over `size` processes of `comm`. */
static void busy_work(MPI_Comm comm, int size, double exponent) {
    double flops = bwexp >= 0 ? pow((double)npix * (double)npix, bwexp) : pow((double)npix, exponent);
    long long nmax = (long long)(flops / ((double)size * 2.0 * (double)sblock));
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (long long k = 0; k < nmax; k++)
        for (long j = 0; j < sblock; j++) scratch[j] += 1.000001 * scratch[(j + 1) % sblock];
    MPI_Barrier(comm);
    timers[T_BW] += MPI_Wtime() - t0;
}

static MPI_Offset slot_offset(long k) { return shared ? (MPI_Offset)(g_rank * nbin + k) * slot_bytes : (MPI_Offset)k * slot_bytes; }

/* RMOD/WMOD staggering: wait for the token of rank-1 within the group. */
static void token_wait(long mod) {
    if (mod > 1 && g_rank % mod != 0) MPI_Recv(NULL, 0, MPI_BYTE, g_rank - 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
static void token_pass(long mod) {
    if (mod > 1 && (g_rank + 1) % mod != 0 && g_rank + 1 < g_procs) MPI_Send(NULL, 0, MPI_BYTE, g_rank + 1, 77, MPI_COMM_WORLD);
}

static void posix_io(int writing, double *buf, long k) {
    char *p = (char *)buf;
    size_t left = (size_t)local_n * sizeof(double);
    off_t off = (off_t)slot_offset(k);
    while (left > 0) {
        ssize_t n = writing ? pwrite(fd, p, left, off) : pread(fd, p, left, off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("%s of slot %ld: %s", writing ? "pwrite" : "pread", k, n < 0 ? strerror(errno) : "end of file");
        p += n, off += n, left -= (size_t)n;
    }
}

/* One read or write of the local share at slot k: blocking (timed between
 * barriers) or posted (ASYNC; the posting is timed). */
static void io(int writing, double *buf, long k) {
    if (no_io) return;
    long mod = writing ? wmod : rmod;
    double t0;
    if (!async_io) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        token_wait(mod);
        if (use_mpi) {
            MPI_Status st;
            MPI_CHECK(MPI_File_seek(fh, slot_offset(k), MPI_SEEK_SET));
            if (writing) MPI_CHECK(MPI_File_write(fh, buf, (int)local_n, MPI_DOUBLE, &st));
            else MPI_CHECK(MPI_File_read(fh, buf, (int)local_n, MPI_DOUBLE, &st));
            int got = 0;
            MPI_Get_count(&st, MPI_DOUBLE, &got);
            if (got != local_n) die("%s of slot %ld moved %d of %lld doubles", writing ? "write" : "read", k, got, local_n);
        } else {
            posix_io(writing, buf, k);
        }
        token_pass(mod);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        t0 = MPI_Wtime();
        token_wait(mod);
        MPI_CHECK(MPI_File_seek(fh, slot_offset(k), MPI_SEEK_SET));
        if (writing) MPI_CHECK(MPI_File_iwrite(fh, buf, (int)local_n, MPI_DOUBLE, &wreq));
        else MPI_CHECK(MPI_File_iread(fh, buf, (int)local_n, MPI_DOUBLE, &rreq));
        token_pass(mod);
    }
    timers[writing ? T_W : T_R] += MPI_Wtime() - t0;
}

/* ASYNC resync point: wait for the outstanding read or write. */
static void io_wait(int writing) {
    if (!async_io || no_io) return;
    MPI_Request *req = writing ? &wreq : &rreq;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Status st;
    MPI_CHECK(MPI_Wait(req, &st));
    int got = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &got);
    if (got != local_n) die("asynchronous %s moved %d of %lld doubles", writing ? "write" : "read", got, local_n);
    MPI_Barrier(MPI_COMM_WORLD);
    timers[writing ? T_W : T_R] += MPI_Wtime() - t0;
}

static void copy(double *to, const double *from) { memcpy(to, from, (size_t)local_n * sizeof(double)); }

static void json_common(json_t *j) {
    json_begin(j, "madbench2");
    json_str(j, "iomethod", iomethod);
    json_str(j, "iomode", iomode);
    json_str(j, "filetype", filetype);
    json_str(j, "fs", strncmp(prefix, "weft:", 5) == 0 ? "weft" : "local");
    json_int(j, "procs", g_procs);
    json_int(j, "npix", npix);
    json_int(j, "nbin", nbin);
    json_int(j, "nogang", nogang);
    json_int(j, "sblocksize", sblock);
    json_int(j, "fblocksize", fblock);
    json_int(j, "rmod", rmod);
    json_int(j, "wmod", wmod);
    json_num(j, "bwexp", bwexp);
}

static void report_step(const char *step, int reads, int writes) {
    double mean[NTIMERS], mn[NTIMERS], mx[NTIMERS];
    MPI_Allreduce(timers, mean, NTIMERS, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(timers, mn, NTIMERS, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(timers, mx, NTIMERS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long long matrix_bytes = (long long)npix * npix * 8;
    for (int t = 0; t < NTIMERS; t++) {
        mean[t] /= g_procs;
        if (g_rank == 0) fprintf(stderr, "%s_%-5s %10.4f [%10.4f:%10.4f]\n", step, timer_names[t], mean[t], mn[t], mx[t]);
        int count = t == T_R ? reads : t == T_W ? writes : -1;
        if (count == 0 || (no_io && count > 0)) continue;
        json_t j;
        json_common(&j);
        json_str(&j, "step", step);
        json_str(&j, "op", t == T_R ? "read" : t == T_W ? "write" : t == T_BW ? "busy" : "total");
        json_num(&j, "seconds", mx[t]);
        if (count > 0) {
            json_int(&j, "bytes", count * matrix_bytes);
            json_num(&j, "mib_per_s", mib_per_s(count * matrix_bytes, mx[t]));
        }
        json_end(&j);
    }
    memset(timers, 0, sizeof timers);
}

static void step_s(void) {
    double t0 = MPI_Wtime();
    for (long b = 0; b <= nbin; b++) {
        if (b < nbin) {
            fill(0, b);
            busy_work(MPI_COMM_WORLD, g_procs, 2);
        }
        if (b > 0) io_wait(1);
        if (b < nbin) {
            copy(wbuf, mat);
            io(1, wbuf, b);
        }
    }
    timers[T_TOTAL] = MPI_Wtime() - t0;
    report_step("S", 0, (int)nbin);
}

static long long step_w(void) {
    long long bad = 0;
    double t0 = MPI_Wtime();
    for (long b = 0; b <= nbin + 1; b++) {
        if (b >= 1 && b <= nbin) {
            io_wait(0);
            copy(mat, rbuf);
            if (!no_io) bad += verify(mat, 0, b - 1, "W read of dS");
        }
        if (b < nbin) io(0, rbuf, b);
        if (b >= 1 && b <= nbin) {
            if ((b - 1) % nogang == gang) busy_work(gang_comm, gang_size, 3);
            fill(1, b - 1);
        }
        if (b >= 2) io_wait(1);
        if (b >= 1 && b <= nbin) {
            copy(wbuf, mat);
            io(1, wbuf, b - 1);
        }
    }
    timers[T_TOTAL] = MPI_Wtime() - t0;
    report_step("W", (int)nbin, (int)nbin);
    return bad;
}

static long long step_c(void) {
    long long bad = 0;
    double t0 = MPI_Wtime();
    for (long b = 0; b <= nbin; b++) {
        if (b >= 1) {
            io_wait(0);
            copy(mat, rbuf);
            if (!no_io) bad += verify(mat, 1, b - 1, "C read of W");
        }
        if (b < nbin) io(0, rbuf, b);
        if (b >= 1 && (b - 1) % nogang == gang) busy_work(gang_comm, gang_size, 2);
    }
    timers[T_TOTAL] = MPI_Wtime() - t0;
    report_step("C", (int)nbin, 0);
    return bad;
}

static void unsupported(const char *why) {
    json_t j;
    json_common(&j);
    json_str(&j, "status", "unsupported");
    json_str(&j, "error", why);
    json_end(&j);
}

/* Zero-length iwrite/iread after opening: MPI_ERR_UNSUPPORTED_OPERATION
 * from any rank means asynchronous mode cannot run. */
static int probe_async(char *why, size_t len) {
    double dummy = 0;
    int flag = 0, cls = 0;
    const char *calls[2] = {"MPI_File_iwrite", "MPI_File_iread"};
    for (int c = 0; c < 2 && !flag; c++) {
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_CHECK(MPI_File_seek(fh, slot_offset(0), MPI_SEEK_SET));
        int rc = c == 0 ? MPI_File_iwrite(fh, &dummy, 0, MPI_DOUBLE, &req) : MPI_File_iread(fh, &dummy, 0, MPI_DOUBLE, &req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            MPI_Error_class(rc, &cls);
            if (cls != MPI_ERR_UNSUPPORTED_OPERATION) MPI_CHECK(rc);
            flag = 1;
            snprintf(why, len, "%s: MPI_ERR_UNSUPPORTED_OPERATION", calls[c]);
        }
    }
    int any = 0;
    MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && !flag) snprintf(why, len, "MPI_File_iwrite/iread: MPI_ERR_UNSUPPORTED_OPERATION on another rank");
    return any;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    if (argc < 8) {
        if (g_rank == 0) fprintf(stderr, "usage: madbench2 NPIX NBIN NOGANG SBLOCKSIZE FBLOCKSIZE RMOD WMOD [PREFIX]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    npix = atol(argv[1]), nbin = atol(argv[2]), nogang = atol(argv[3]), sblock = atol(argv[4]);
    fblock = atol(argv[5]), rmod = atol(argv[6]), wmod = atol(argv[7]);
    if (argc > 8) prefix = argv[8];
    iomethod = getenv("IOMETHOD") ? getenv("IOMETHOD") : "POSIX";
    iomode = getenv("IOMODE") ? getenv("IOMODE") : "SYNC";
    filetype = getenv("FILETYPE") ? getenv("FILETYPE") : "UNIQUE";
    if (getenv("BWEXP")) bwexp = atof(getenv("BWEXP"));
    use_mpi = strcmp(iomethod, "MPI") == 0;
    async_io = strcmp(iomode, "ASYNC") == 0;
    no_io = strcmp(iomode, "NONE") == 0;
    shared = strcmp(filetype, "SHARED") == 0;
    if (!use_mpi && strcmp(iomethod, "POSIX") != 0) die("IOMETHOD must be POSIX or MPI");
    if (!async_io && !no_io && strcmp(iomode, "SYNC") != 0) die("IOMODE must be SYNC, ASYNC or NONE");
    if (!shared && strcmp(filetype, "UNIQUE") != 0) die("FILETYPE must be UNIQUE or SHARED");

    /* Process grid: pr x pc, pr the largest divisor of P not above sqrt(P). */
    int pr = 1;
    for (int d = 1; (long)d * d <= g_procs; d++)
        if (g_procs % d == 0) pr = d;
    int pc = g_procs / pr, myrow = g_rank / pc, mycol = g_rank % pc;
    if (npix <= 0 || nbin <= 0 || nogang <= 0 || sblock <= 0 || fblock <= 0 || fblock % 8 || rmod <= 0 || wmod <= 0)
        die("parameters must be positive and FBLOCKSIZE a multiple of 8");
    if ((npix + sblock - 1) / sblock < (pc > pr ? pc : pr)) die("ceil(NPIX/SBLOCKSIZE) must be at least the process grid's side (%dx%d)", pr, pc);
    if (g_procs % nogang || nbin % nogang) die("NOGANG must divide both P and NBIN");
    if ((g_procs / nogang) % rmod || (g_procs / nogang) % wmod) die("RMOD and WMOD must divide P/NOGANG");
    local_n = (long long)numroc(npix, sblock, myrow, pr) * numroc(npix, sblock, mycol, pc);
    long long largest = 0, total_n = 0;
    MPI_Allreduce(&local_n, &largest, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&local_n, &total_n, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (total_n != (long long)npix * npix) die("shares do not add up (%lld of %ld^2)", total_n, npix);
    slot_bytes = (largest * 8 + fblock - 1) / fblock * fblock;
    gang_size = g_procs / (int)nogang;
    gang = g_rank / gang_size;
    MPI_Comm_split(MPI_COMM_WORLD, gang, g_rank, &gang_comm);
    if (g_rank == 0)
        fprintf(stderr, "MADbench2 I/O mode: NPIX %ld NBIN %ld NOGANG %ld SBLOCKSIZE %ld FBLOCKSIZE %ld RMOD %ld WMOD %ld; "
                        "IOMETHOD %s IOMODE %s FILETYPE %s BWEXP %g; P %d (grid %dx%d), slot %lld bytes, prefix %s\n",
                npix, nbin, nogang, sblock, fblock, rmod, wmod, iomethod, iomode, filetype, bwexp, g_procs, pr, pc, slot_bytes, prefix);

    if (async_io && !use_mpi) {
        unsupported("IOMODE=ASYNC needs IOMETHOD=MPI (POSIX asynchronous I/O is out of scope, as in the original)");
        MPI_Finalize();
        return 0;
    }
    size_t bytes = (size_t)local_n * sizeof(double);
    mat = malloc(bytes), rbuf = malloc(bytes), wbuf = malloc(bytes), scratch = calloc((size_t)sblock, sizeof(double));
    if (!mat || !rbuf || !wbuf || !scratch) die("out of memory (%zu bytes per matrix)", bytes);
    memset(rbuf, 0, bytes), memset(wbuf, 0, bytes);

    char path[4096];
    if (shared) snprintf(path, sizeof path, "%sdata", prefix);
    else snprintf(path, sizeof path, "%sdata_%d", prefix, g_rank);
    if (!no_io) {
        if (use_mpi) {
            MPI_Comm comm = shared ? MPI_COMM_WORLD : MPI_COMM_SELF;
            if (!shared) MPI_File_delete(path, MPI_INFO_NULL);
            else if (g_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_CHECK(MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
            MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
            char why[256] = "";
            if (async_io && probe_async(why, sizeof why)) {
                unsupported(why);
                MPI_CHECK(MPI_File_close(&fh));
                if (!shared || g_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
                MPI_Finalize();
                return 0;
            }
        } else {
            if (!shared || g_rank == 0) fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
            MPI_Barrier(MPI_COMM_WORLD);
            if (shared && g_rank != 0) fd = open(path, O_RDWR);
            if (fd < 0) die("open %s: %s", path, strerror(errno));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    step_s();
    long long bad = step_w();
    bad += step_c();
    bad = sum_all(bad);
    if (!no_io) {
        if (use_mpi) MPI_CHECK(MPI_File_close(&fh));
        else close(fd);
        MPI_Barrier(MPI_COMM_WORLD);
        if (!shared || g_rank == 0) {
            if (use_mpi) MPI_File_delete(path, MPI_INFO_NULL);
            else unlink(path);
        }
    }
    if (bad) die("%lld elements read back wrong", bad);
    if (g_rank == 0) fprintf(stderr, "MADbench2: all data read back verified\n");
    MPI_Finalize();
    return 0;
}
