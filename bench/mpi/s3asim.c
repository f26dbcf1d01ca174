/* S3aSim (Ching ch.6): the I/O of a master/worker sequence search
 * (mpiBLAST-like database segmentation), simulated.
 *
 *   s3asim --path PREFIX [options]            (needs 2 or more processes)
 *
 * Rank 0 is the master, the others are workers. A task is a (query,
 * fragment) pair, handed out in order: a worker asks with the results of
 * its previous task (the master takes requests with a blocking
 * MPI_Recv from any source; every other message is MPI_Isend / MPI_Irecv /
 * MPI_Test, waiting only when nothing else can proceed). Searching takes
 * startup + size-linear time (the compute model: --compute-us +
 * --compute-ns-per-byte * result bytes, divided by --speed), simulated
 * with nanosleep so the 2 cores stay free for I/O.
 *
 * The data is pseudo-random and deterministic, the same for every process
 * count and strategy: query q's length and its result count (between
 * --results-min and --results-max) come from a hash of q; result r of q
 * belongs to fragment hash(q, r) % F, has a database sequence length, a
 * score and a size between --result-min-bytes and 3*max(query length,
 * sequence length) from hashes of (q, r); lengths follow an exponential
 * law of mean 4,401 bytes (the NT database's mean), from 6 bytes up to
 * 43 MB. The output file holds the queries in order, each query's results
 * sorted by score (highest first, then r), each result's bytes
 * pattern_byte(q * 2^32 + r + 1, i). So the output file of every strategy
 * and process count is byte-identical (tests/mpi_apps.rs checks it).
 *
 * Strategies (--strategies, default all):
 *   mw        workers send scores and result data; the master merges and
 *             writes each finished query contiguously (one write_at);
 *   ww-coll   workers send only scores; the master sends each worker the
 *             64-bit offsets of its results of each finished query, and
 *             the workers write it together with MPI_File_write_at_all
 *             (hindexed view; two-phase: weft_coll_method=two_phase,
 *             romio_cb_write=enable);
 *   ww-posix  the same, but each worker writes as soon as its offsets
 *             arrive, one MPI_File_write_at per result;
 *   ww-list   the same, one independent write of all its results of the
 *             query through a hindexed view (weft_io_method=list; ROMIO
 *             has no list I/O on a local file system and runs its default).
 * --sync off,on (default both): "query sync", a barrier of the writers
 * after each query's I/O (the workers for ww-*; nothing for mw, whose only
 * writer is the master).
 *
 * Timed phases (seconds, the slowest process of each): setup (open),
 * distribution (asking for and handing out tasks), compute, merge
 * (master: sorting and assigning offsets), gather (master: receiving
 * results), io, sync (query sync and the closing), other (the rest), and
 * total. After the run the whole file is checked byte for byte (untimed).
 *
 * Options: --queries Q (20)  --fragments F (128)  --results-min (1000)
 *   --results-max (2000)  --result-min-bytes (32)  --compute-us (1000)
 *   --compute-ns-per-byte (10)  --speed (1)  --strategies LIST
 *   --sync LIST  --keep (leave the output files)
 * Each run writes PATH.STRATEGY-nosync or PATH.STRATEGY-sync.
 * One JSON object per (strategy, sync) on stdout. */
#include "common.h"

#include <getopt.h>
#include <math.h>
#include <time.h>

enum { TAG_REQ = 1, TAG_TASK, TAG_OFFS };
enum { PH_SETUP, PH_DIST, PH_COMPUTE, PH_MERGE, PH_GATHER, PH_IO, PH_SYNC, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"setup", "distribution", "compute", "merge", "gather", "io", "sync"};

typedef struct {
    long long queries, fragments, results_min, results_max, result_min_bytes;
    double compute_us, compute_ns_per_byte, speed;
} params_t;

/* One result: the fields that travel (scores) and where it goes. */
typedef struct {
    long long r, bytes, score, offset;
} result_t;

static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) { return mix(mix(mix(a) ^ b) ^ c); }

/* A sequence length: exponential, mean 4401, within [6, 43 MB]. */
static long long seq_len(uint64_t h) {
    double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
    double len = 6.0 - 4395.0 * log(u);
    return len > 43e6 ? 43000000 : (long long)len;
}

static long long query_results(const params_t *p, long long q) {
    return p->results_min + (long long)(hash3(1, (uint64_t)q, 0) % (uint64_t)(p->results_max - p->results_min + 1));
}
static long long result_fragment(const params_t *p, long long q, long long r) {
    return (long long)(hash3(2, (uint64_t)q, (uint64_t)r) % (uint64_t)p->fragments);
}
static result_t make_result(const params_t *p, long long q, long long r) {
    long long qlen = seq_len(hash3(3, (uint64_t)q, 0)), dlen = seq_len(hash3(4, (uint64_t)q, (uint64_t)r));
    long long most = 3 * (qlen > dlen ? qlen : dlen);
    if (most < p->result_min_bytes) most = p->result_min_bytes;
    result_t x = {r, p->result_min_bytes + (long long)(hash3(5, (uint64_t)q, (uint64_t)r) % (uint64_t)(most - p->result_min_bytes + 1)),
                  (long long)(hash3(6, (uint64_t)q, (uint64_t)r) >> 34), -1};
    return x;
}
static uint64_t result_id(long long q, long long r) { return ((uint64_t)q << 32) + (uint64_t)r + 1; }

static int by_score(const void *a, const void *b) {
    const result_t *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}
static int by_offset(const void *a, const void *b) {
    const result_t *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Sorts a finished query's results into file order and gives each its
 * offset from `base`; returns the query's bytes. */
static long long place_query(result_t *res, long long n, long long base) {
    qsort(res, (size_t)n, sizeof *res, by_score);
    long long at = base;
    for (long long i = 0; i < n; i++) res[i].offset = at, at += res[i].bytes;
    return at - base;
}

/* The whole output, as every process can compute it: results of query q
 * at layout[first[q] .. first[q+1]), in file order. */
typedef struct {
    result_t *results;
    long long *first, bytes;
} layout_t;

static layout_t full_layout(const params_t *p) {
    layout_t l = {NULL, calloc((size_t)p->queries + 1, sizeof(long long)), 0};
    long long total = 0;
    for (long long q = 0; q < p->queries; q++) total += query_results(p, q);
    l.results = malloc(sizeof(result_t) * (size_t)(total ? total : 1));
    if (!l.results || !l.first) die("out of memory");
    for (long long q = 0, at = 0; q < p->queries; q++) {
        long long n = query_results(p, q);
        l.first[q] = at;
        for (long long r = 0; r < n; r++) l.results[at + r] = make_result(p, q, r);
        l.bytes += place_query(l.results + at, n, l.bytes);
        at += n;
        l.first[q + 1] = at;
    }
    return l;
}

/* ---- timing ---- */
static double g_phase[PH_COUNT];
static int g_phase_now = -1;
static double g_phase_t0;
static void phase(int which) {
    double now = MPI_Wtime();
    if (g_phase_now >= 0) g_phase[g_phase_now] += now - g_phase_t0;
    g_phase_now = which, g_phase_t0 = now;
}

static void compute_sleep(const params_t *p, long long bytes) {
    double us = (p->compute_us + p->compute_ns_per_byte * (double)bytes / 1000.0) / p->speed;
    if (us <= 0) return;
    struct timespec ts = {(time_t)(us / 1e6), (long)fmod(us * 1000.0, 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- the file ---- */
typedef struct {
    const char *name;
    int mw, coll, posix, list;
} strategy_t;

static MPI_Info strategy_info(const strategy_t *s) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "weft_io_method", s->list ? "list" : s->posix ? "posix" : "datatype");
    if (s->coll) {
        MPI_Info_set(info, "weft_coll_method", "two_phase");
        MPI_Info_set(info, "romio_cb_write", "enable");
    }
    return info;
}

/* A worker's results of one query, with their bytes. */
typedef struct {
    result_t *res;
    long long n, cap;
    unsigned char *data; /* results' bytes back to back, in arrival order */
    long long *data_at;  /* where result i's bytes start in data */
    long long data_len, data_cap;
} held_t;

static void held_add(held_t *h, result_t x, long long q) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 16;
        h->res = realloc(h->res, sizeof(result_t) * (size_t)h->cap);
        h->data_at = realloc(h->data_at, sizeof(long long) * (size_t)h->cap);
        if (!h->res || !h->data_at) die("out of memory");
    }
    if (h->data_len + x.bytes > h->data_cap) {
        h->data_cap = (h->data_len + x.bytes) * 2;
        h->data = realloc(h->data, (size_t)h->data_cap);
        if (!h->data) die("out of memory");
    }
    h->res[h->n] = x;
    h->data_at[h->n] = h->data_len;
    pattern_fill(h->data + h->data_len, result_id(q, x.r), 0, (size_t)x.bytes);
    h->data_len += x.bytes;
    h->n++;
}

/* Writes a worker's results of query q at the offsets the master sent
 * (pairs r, offset) with the strategy's calls; collective for ww-coll. */
static void worker_write(MPI_File fh, const strategy_t *s, held_t *h, const long long *pairs, long long npairs,
                         MPI_Info info) {
    if (npairs != h->n) die("master placed %lld results, worker holds %lld", npairs, h->n);
    /* match the master's (r, offset) pairs to the held results */
    for (long long i = 0; i < npairs; i++) {
        long long k = 0;
        while (k < h->n && h->res[k].r != pairs[2 * i]) k++;
        if (k == h->n) die("master placed result %lld that this worker does not hold", pairs[2 * i]);
        h->res[k].offset = pairs[2 * i + 1];
    }
    /* the results in file order; `score` now holds where the bytes are in h->data */
    result_t *order = malloc(sizeof(result_t) * (size_t)(h->n + 1));
    if (!order) die("out of memory");
    for (long long i = 0; i < h->n; i++) order[i] = h->res[i], order[i].score = h->data_at[i];
    qsort(order, (size_t)h->n, sizeof *order, by_offset);
    MPI_Status st;
    if (s->posix) {
        for (long long i = 0; i < h->n; i++)
            MPI_CHECK(MPI_File_write_at(fh, order[i].offset, h->data + order[i].score, (int)order[i].bytes, MPI_BYTE, &st));
    } else {
        int n = (int)h->n;
        int *lens = malloc(sizeof(int) * (size_t)(n + 1));
        MPI_Aint *file_disp = malloc(sizeof(MPI_Aint) * (size_t)(n + 1)), *mem_disp = malloc(sizeof(MPI_Aint) * (size_t)(n + 1));
        if (!lens || !file_disp || !mem_disp) die("out of memory");
        for (int i = 0; i < n; i++) lens[i] = (int)order[i].bytes, file_disp[i] = order[i].offset, mem_disp[i] = order[i].score;
        MPI_Datatype ftype, mtype;
        MPI_CHECK(MPI_Type_create_hindexed(n, lens, file_disp, MPI_BYTE, &ftype));
        MPI_CHECK(MPI_Type_create_hindexed(n, lens, mem_disp, MPI_BYTE, &mtype));
        MPI_CHECK(MPI_Type_commit(&ftype));
        MPI_CHECK(MPI_Type_commit(&mtype));
        /* a rank without results (it still takes part in ww-coll) uses
         * plain types: ROMIO 3.2.1 crashes flattening an empty hindexed */
        MPI_CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, n ? ftype : MPI_BYTE, "native", info));
        int count = n ? 1 : 0;
        MPI_Datatype memtype = n ? mtype : MPI_BYTE;
        if (s->coll) MPI_CHECK(MPI_File_write_at_all(fh, 0, h->data, count, memtype, &st));
        else MPI_CHECK(MPI_File_write_at(fh, 0, h->data, count, memtype, &st));
        MPI_Type_free(&ftype), MPI_Type_free(&mtype);
        free(lens), free(file_disp), free(mem_disp);
    }
    free(order);
    free(h->res), free(h->data_at), free(h->data);
    memset(h, 0, sizeof *h);
}

/* ---- master ---- */
typedef struct {
    long long done_fragments, n, cap, bytes;
    result_t *res;
    int *owner;            /* worker of each result */
    unsigned char **data;  /* mw: each result's bytes */
} query_t;

static void master(const params_t *p, const strategy_t *s, int query_sync, MPI_File fh) {
    (void)query_sync;
    int workers = g_procs - 1, stopped = 0;
    query_t *qs = calloc((size_t)p->queries, sizeof(query_t));
    MPI_Request *sends = NULL;
    void **send_bufs = NULL;
    long long nsends = 0, cap_sends = 0, next_task = 0, tasks = p->queries * p->fragments, next_query = 0, base = 0;
    if (!qs) die("out of memory");
    while (stopped < workers) {
        phase(PH_GATHER);
        MPI_Status st;
        MPI_CHECK(MPI_Probe(MPI_ANY_SOURCE, TAG_REQ, MPI_COMM_WORLD, &st));
        int len = 0;
        MPI_Get_count(&st, MPI_BYTE, &len);
        unsigned char *msg = malloc((size_t)len + 1);
        if (!msg) die("out of memory");
        MPI_CHECK(MPI_Recv(msg, len, MPI_BYTE, st.MPI_SOURCE, TAG_REQ, MPI_COMM_WORLD, &st));
        long long head[3];
        memcpy(head, msg, sizeof head); /* query, fragment (-1: first request), results */
        if (head[1] >= 0) {
            query_t *q = &qs[head[0]];
            const result_t *res = (const result_t *)(msg + sizeof head);
            const unsigned char *data = (const unsigned char *)(res + head[2]);
            for (long long i = 0; i < head[2]; i++) {
                if (q->n == q->cap) {
                    q->cap = q->cap ? 2 * q->cap : 64;
                    q->res = realloc(q->res, sizeof(result_t) * (size_t)q->cap);
                    q->owner = realloc(q->owner, sizeof(int) * (size_t)q->cap);
                    q->data = realloc(q->data, sizeof(unsigned char *) * (size_t)q->cap);
                    if (!q->res || !q->owner || !q->data) die("out of memory");
                }
                q->res[q->n] = res[i];
                q->owner[q->n] = st.MPI_SOURCE;
                q->data[q->n] = NULL;
                if (s->mw) {
                    q->data[q->n] = malloc((size_t)res[i].bytes + 1);
                    if (!q->data[q->n]) die("out of memory");
                    memcpy(q->data[q->n], data, (size_t)res[i].bytes);
                    data += res[i].bytes;
                }
                q->n++;
            }
            q->done_fragments++;
        }
        free(msg);
        /* finished queries, in order: merge, then write (mw) or hand out offsets */
        while (next_query < p->queries && qs[next_query].done_fragments == p->fragments) {
            query_t *q = &qs[next_query];
            phase(PH_MERGE);
            /* the owners travel with the results through the sort: keep them in score's place */
            result_t *sorted = malloc(sizeof(result_t) * (size_t)(q->n + 1));
            if (!sorted) die("out of memory");
            for (long long i = 0; i < q->n; i++) sorted[i] = q->res[i], sorted[i].offset = i;
            qsort(sorted, (size_t)q->n, sizeof *sorted, by_score);
            long long at = base;
            for (long long i = 0; i < q->n; i++) {
                long long from = sorted[i].offset;
                q->res[from].offset = at;
                at += q->res[from].bytes;
            }
            q->bytes = at - base;
            if (s->mw) {
                unsigned char *out = malloc((size_t)q->bytes + 1);
                if (!out) die("out of memory");
                for (long long i = 0; i < q->n; i++) {
                    memcpy(out + q->res[i].offset - base, q->data[i], (size_t)q->res[i].bytes);
                    free(q->data[i]);
                }
                phase(PH_IO);
                MPI_Status wst;
                MPI_CHECK(MPI_File_write_at(fh, base, out, (int)q->bytes, MPI_BYTE, &wst));
                free(out);
            } else {
                for (int w = 1; w <= workers; w++) {
                    long long count = 0;
                    for (long long i = 0; i < q->n; i++) count += q->owner[i] == w;
                    long long *pairs = malloc(sizeof(long long) * (size_t)(2 * count + 2));
                    if (!pairs) die("out of memory");
                    pairs[0] = next_query;
                    long long k = 1;
                    for (long long i = 0; i < q->n; i++)
                        if (q->owner[i] == w) pairs[k++] = q->res[i].r, pairs[k++] = q->res[i].offset;
                    if (nsends == cap_sends) {
                        cap_sends = cap_sends ? 2 * cap_sends : 64;
                        sends = realloc(sends, sizeof(MPI_Request) * (size_t)cap_sends);
                        send_bufs = realloc(send_bufs, sizeof(void *) * (size_t)cap_sends);
                        if (!sends || !send_bufs) die("out of memory");
                    }
                    send_bufs[nsends] = pairs;
                    MPI_CHECK(MPI_Isend(pairs, (int)k, MPI_LONG_LONG, w, TAG_OFFS, MPI_COMM_WORLD, &sends[nsends++]));
                }
            }
            base = at;
            free(sorted), free(q->res), free(q->owner), free(q->data);
            next_query++;
        }
        phase(PH_DIST);
        long long task[2] = {-1, -1};
        if (next_task < tasks) task[0] = next_task / p->fragments, task[1] = next_task % p->fragments, next_task++;
        else stopped++;
        MPI_CHECK(MPI_Send(task, 2, MPI_LONG_LONG, st.MPI_SOURCE, TAG_TASK, MPI_COMM_WORLD));
    }
    phase(PH_SYNC);
    /* (real statuses: GCC warns about MPICH's MPI_STATUSES_IGNORE) */
    MPI_Status *statuses = malloc(sizeof(MPI_Status) * (size_t)(nsends + 1));
    if (!statuses) die("out of memory");
    if (nsends) MPI_CHECK(MPI_Waitall((int)nsends, sends, statuses));
    free(statuses);
    for (long long i = 0; i < nsends; i++) free(send_bufs[i]);
    free(sends), free(send_bufs), free(qs);
}

/* ---- worker ---- */
static void worker(const params_t *p, const strategy_t *s, int query_sync, MPI_File fh, MPI_Comm workers, MPI_Info info) {
    held_t *held = calloc((size_t)p->queries, sizeof(held_t));
    long long written = 0; /* queries whose offsets were handled, in order */
    long long task[2] = {-1, -1};
    unsigned char *msg = NULL;
    long long msg_len = 3 * sizeof(long long);
    if (!held) die("out of memory");
    msg = calloc(1, (size_t)msg_len);
    ((long long *)msg)[1] = -1; /* the first request carries no results */
    int stopped = 0;
    MPI_Request offs_req = MPI_REQUEST_NULL;
    long long *offs = NULL;
    int offs_cap = 0;
    while (!stopped || written < (s->mw ? 0 : p->queries)) {
        if (!stopped) {
            phase(PH_DIST);
            MPI_Request reqs[2];
            MPI_Status statuses[2];
            MPI_CHECK(MPI_Isend(msg, (int)msg_len, MPI_BYTE, 0, TAG_REQ, MPI_COMM_WORLD, &reqs[0]));
            MPI_CHECK(MPI_Irecv(task, 2, MPI_LONG_LONG, 0, TAG_TASK, MPI_COMM_WORLD, &reqs[1]));
            MPI_CHECK(MPI_Waitall(2, reqs, statuses));
            free(msg), msg = NULL;
            if (task[0] < 0) {
                stopped = 1;
                continue;
            }
            /* search: the results of this fragment, and the time it takes */
            phase(PH_COMPUTE);
            long long q = task[0], f = task[1], n = query_results(p, q), mine = 0, bytes = 0;
            for (long long r = 0; r < n; r++) mine += result_fragment(p, q, r) == f;
            result_t *res = malloc(sizeof(result_t) * (size_t)(mine + 1));
            if (!res) die("out of memory");
            long long k = 0;
            for (long long r = 0; r < n; r++)
                if (result_fragment(p, q, r) == f) res[k] = make_result(p, q, r), bytes += res[k].bytes, k++;
            compute_sleep(p, bytes);
            msg_len = (long long)(3 * sizeof(long long) + sizeof(result_t) * (size_t)mine) + (s->mw ? bytes : 0);
            msg = malloc((size_t)msg_len);
            if (!msg) die("out of memory");
            long long head[3] = {q, f, mine};
            memcpy(msg, head, sizeof head);
            memcpy(msg + sizeof head, res, sizeof(result_t) * (size_t)mine);
            unsigned char *data = msg + sizeof head + sizeof(result_t) * (size_t)mine;
            for (long long i = 0; i < mine; i++) {
                if (s->mw) pattern_fill(data, result_id(q, res[i].r), 0, (size_t)res[i].bytes), data += res[i].bytes;
                else held_add(&held[q], res[i], q);
            }
            free(res);
            if (s->mw) continue;
        }
        /* offsets of finished queries: take all that arrived (all, once stopped) */
        for (;;) {
            phase(PH_DIST);
            if (offs_req == MPI_REQUEST_NULL) {
                MPI_Status st;
                int there = 0;
                if (stopped) {
                    MPI_CHECK(MPI_Probe(0, TAG_OFFS, MPI_COMM_WORLD, &st));
                    there = 1;
                } else {
                    MPI_CHECK(MPI_Iprobe(0, TAG_OFFS, MPI_COMM_WORLD, &there, &st));
                }
                if (!there) break;
                int count = 0;
                MPI_Get_count(&st, MPI_LONG_LONG, &count);
                if (count > offs_cap) offs_cap = count, offs = realloc(offs, sizeof(long long) * (size_t)count);
                if (!offs) die("out of memory");
                MPI_CHECK(MPI_Irecv(offs, count, MPI_LONG_LONG, 0, TAG_OFFS, MPI_COMM_WORLD, &offs_req));
            }
            MPI_Status st;
            MPI_CHECK(MPI_Wait(&offs_req, &st));
            int count = 0;
            MPI_Get_count(&st, MPI_LONG_LONG, &count);
            long long q = offs[0];
            if (q != written) die("offsets of query %lld arrived before those of %lld", q, written);
            phase(PH_IO);
            worker_write(fh, s, &held[q], offs + 1, (count - 1) / 2, info);
            if (query_sync) {
                phase(PH_SYNC);
                MPI_Barrier(workers);
            }
            written++;
            if (stopped && written == p->queries) break;
        }
    }
    free(msg), free(offs), free(held);
}

/* Checks the whole file against the layout (untimed); wrong bytes, all ranks. */
static long long verify_output(const char *path, const layout_t *l, const params_t *p) {
    MPI_File fh;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    MPI_Offset size = 0;
    MPI_CHECK(MPI_File_get_size(fh, &size));
    if (size != l->bytes) die("output is %lld bytes, expected %lld", (long long)size, l->bytes);
    long long share = (l->bytes + g_procs - 1) / g_procs, first = share * g_rank;
    long long last = first + share < l->bytes ? first + share : l->bytes, bad = 0;
    unsigned char *buf = malloc((size_t)(last > first ? last - first : 1));
    if (!buf) die("out of memory");
    MPI_Status st;
    if (last > first) MPI_CHECK(MPI_File_read_at(fh, first, buf, (int)(last - first), MPI_BYTE, &st));
    for (long long q = 0; q < p->queries && !bad; q++)
        for (long long i = l->first[q]; i < l->first[q + 1]; i++) {
            const result_t *x = &l->results[i];
            long long from = x->offset > first ? x->offset : first, to = x->offset + x->bytes < last ? x->offset + x->bytes : last;
            for (long long b = from; b < to; b++)
                if (buf[b - first] != pattern_byte(result_id(q, x->r), (uint64_t)(b - x->offset))) {
                    if (!bad) fprintf(stderr, "rank %d: s3asim output byte %lld (query %lld result %lld) wrong\n", g_rank, b, q, x->r);
                    bad++;
                }
        }
    free(buf);
    MPI_CHECK(MPI_File_close(&fh));
    return sum_all(bad);
}

static void run(const char *prefix, const params_t *p, const strategy_t *s, int query_sync, const layout_t *l, int keep) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s-%s", prefix, s->name, query_sync ? "sync" : "nosync");
    memset(g_phase, 0, sizeof g_phase);
    g_phase_now = -1;
    if (g_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Comm writers;
    int writer = s->mw ? g_rank == 0 : g_rank != 0;
    MPI_Comm_split(MPI_COMM_WORLD, writer, g_rank, &writers);
    MPI_Info info = strategy_info(s);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    phase(PH_SETUP);
    MPI_File fh = MPI_FILE_NULL;
    /* ww-coll writes collectively over the workers; the others write
     * independently, on a handle of their own (set_view is collective) */
    if (writer) MPI_CHECK(MPI_File_open(s->coll ? writers : MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh));
    if (g_rank == 0) master(p, s, query_sync, fh);
    else worker(p, s, query_sync, fh, writers, info);
    phase(PH_SYNC);
    if (writer) MPI_CHECK(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    phase(-1);
    double total = MPI_Wtime() - t0;
    if (verify_output(path, l, p)) die("s3asim %s: output differs from the expected layout", s->name);
    json_t j;
    json_begin(&j, "s3asim");
    json_str(&j, "fs", fs_of(path));
    json_str(&j, "strategy", s->name);
    json_int(&j, "query_sync", query_sync);
    json_int(&j, "procs", g_procs);
    json_int(&j, "queries", p->queries);
    json_int(&j, "fragments", p->fragments);
    json_num(&j, "speed", p->speed);
    json_int(&j, "bytes", l->bytes);
    double sum = 0;
    for (int i = 0; i < PH_COUNT; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s_s", phase_names[i]);
        json_num(&j, key, max_all(g_phase[i]));
        sum += g_phase[i];
    }
    json_num(&j, "other_s", max_all(total - sum > 0 ? total - sum : 0));
    json_num(&j, "seconds", max_all(total));
    json_num(&j, "mib_per_s", mib_per_s(l->bytes, max_all(total)));
    json_end(&j);
    MPI_Info_free(&info);
    MPI_Comm_free(&writers);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0 && !keep) MPI_File_delete(path, MPI_INFO_NULL);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    params_t p = {20, 128, 1000, 2000, 32, 1000, 10, 1};
    const char *path = NULL, *strategies = "mw,ww-coll,ww-posix,ww-list", *syncs = "off,on";
    int keep = 0;
    static struct option opts[] = {
        {"path", 1, 0, 'p'},        {"queries", 1, 0, 'q'},          {"fragments", 1, 0, 'f'},
        {"results-min", 1, 0, 'a'}, {"results-max", 1, 0, 'b'},      {"result-min-bytes", 1, 0, 'm'},
        {"compute-us", 1, 0, 'c'},  {"compute-ns-per-byte", 1, 0, 'n'}, {"speed", 1, 0, 's'},
        {"strategies", 1, 0, 'S'},  {"sync", 1, 0, 'y'},             {"keep", 0, 0, 'k'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': path = optarg; break;
        case 'q': p.queries = atoll(optarg); break;
        case 'f': p.fragments = atoll(optarg); break;
        case 'a': p.results_min = atoll(optarg); break;
        case 'b': p.results_max = atoll(optarg); break;
        case 'm': p.result_min_bytes = atoll(optarg); break;
        case 'c': p.compute_us = atof(optarg); break;
        case 'n': p.compute_ns_per_byte = atof(optarg); break;
        case 's': p.speed = atof(optarg); break;
        case 'S': strategies = optarg; break;
        case 'y': syncs = optarg; break;
        case 'k': keep = 1; break;
        default: die("unknown option");
        }
    }
    if (!path) die("--path is required");
    if (g_procs < 2) die("s3asim needs a master and at least one worker");
    if (p.queries < 1 || p.fragments < 1 || p.results_min < 0 || p.results_max < p.results_min ||
        p.result_min_bytes < 1 || p.speed <= 0 || p.compute_us < 0 || p.compute_ns_per_byte < 0)
        die("bad parameters");
    static const strategy_t all[] = {{"mw", 1, 0, 0, 0}, {"ww-coll", 0, 1, 0, 0}, {"ww-posix", 0, 0, 1, 0}, {"ww-list", 0, 0, 0, 1}};
    layout_t l = full_layout(&p);
    if (l.bytes > (1LL << 31) - 1) die("output too large (%lld bytes; int counts)", l.bytes);
    int ran = 0;
    for (int i = 0; i < 4; i++)
        for (int sync = 0; sync < 2; sync++)
            if (list_has(strategies, all[i].name) && list_has(syncs, sync ? "on" : "off")) run(path, &p, &all[i], sync, &l, keep), ran++;
    if (!ran) die("no strategy selected (--strategies mw,ww-coll,ww-posix,ww-list --sync off,on)");
    free(l.results), free(l.first);
    MPI_Finalize();
    return 0;
}
