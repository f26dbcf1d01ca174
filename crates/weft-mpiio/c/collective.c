/* Collective data access on Weft files (read_all, write_all, read_at_all,
 * write_at_all and MPICH's _c variants): the MPI half of two-phase
 * collective buffering, and the hints that choose it.
 *
 * Every collective call starts with one allgather of each rank's file range
 * [start, end) and of its hints; rank 0's hints decide for everyone (MPI
 * requires equal hints; deciding from one rank keeps a mismatch from
 * deadlocking). Then either
 *  - datatype: each rank's own datatype request, then a barrier; or
 *  - two-phase: the aggregate range [lo, hi) is cut into cb_nodes file
 *    domains (boundaries rounded up to the file's strip size, so a strip is
 *    written by one aggregator), aggregator k being rank k*nprocs/cb_nodes.
 *    Each domain is processed in rounds of at most cb_buffer_size bytes of
 *    file range: per round an alltoall of (regions, bytes) counts, an
 *    alltoallv of the (offset, length) pairs and, for writes, an alltoallv
 *    of the data; the aggregator writes the union of what it got (one
 *    contiguous write, or list I/O when there are holes: no read-modify-
 *    write). Reads send the pairs, the aggregator reads the union and an
 *    alltoallv returns the bytes. A final allreduce spreads aggregator I/O
 *    errors to every rank (MPI_ERR_IO).
 *
 * Hints (MPI_File_open info, MPI_File_set_info; MPI_File_get_info reports
 * the effective values):
 *   weft_coll_method = two_phase | datatype   (default WEFT_COLL_METHOD_DEFAULT)
 *   romio_cb_write / romio_cb_read = enable | disable | automatic (default
 *     automatic: two-phase only when some ranks' [start, end) ranges
 *     overlap, decided from the gathered ranges; ignored with datatype)
 *   cb_nodes = aggregators (default: number of ranks, clamped to [1, nprocs])
 *   cb_buffer_size = bytes per aggregator per round (default 16 MiB,
 *     clamped to [1, 1 GiB])
 * Unparsable values are ignored (the default stays), as ROMIO does.
 *
 * Rust (src/collective.rs) owns plans, file I/O and data; this file owns
 * every MPI call. Constants all come from mpi.h. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weft_mpiio.h"
#include "weft_mpiio_internal.h"
#include "weft_objects.h"
#include "weft_shared.h"

enum { WEFT_METHOD_TWO_PHASE = 0, WEFT_METHOD_DATATYPE = 1 };
enum { WEFT_CB_ENABLE = 0, WEFT_CB_DISABLE = 1, WEFT_CB_AUTOMATIC = 2 };

/* The default collective method: datatype. Weft servers walk a datatype
 * request themselves (one request per server per rank), so there is no
 * small-request penalty for two-phase to remove, while two-phase adds an
 * MPI exchange and copies; measured in README.md (bench_collective_methods). */
#define WEFT_COLL_METHOD_DEFAULT WEFT_METHOD_DATATYPE
#define WEFT_CB_BUFFER_DEFAULT (16LL << 20)
#define WEFT_CB_BUFFER_MAX (1LL << 30)
/* Words each rank contributes to the opening allgather. */
#define WEFT_GATHER_WORDS 6

typedef struct {
    long long method, cb_read, cb_write, cb_nodes, cb_buffer_size;
} weft_hints;

/* Debug counters of this process (weft_mpiio_coll_stats). */
static long long weft_two_phase_calls = 0, weft_datatype_calls = 0, weft_rounds = 0;

int weft_mpiio_coll_stats(long long *two_phase_calls, long long *datatype_calls, long long *rounds) {
    if (two_phase_calls) *two_phase_calls = weft_two_phase_calls;
    if (datatype_calls) *datatype_calls = weft_datatype_calls;
    if (rounds) *rounds = weft_rounds;
    return MPI_SUCCESS;
}

/* Allocation of control and data buffers; running out of memory in the
 * middle of a collective cannot be reported without deadlocking the
 * other ranks, so it aborts the job with a message. */
static void *weft_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "libweft_mpiio: out of memory (%zu bytes) in a collective call\n", bytes);
        PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    }
    return p;
}

static int weft_info_value(MPI_Info info, const char *key, char *value, int cap) {
    int flag = 0;
    if (info == MPI_INFO_NULL) return 0;
    PMPI_Info_get(info, key, cap - 1, value, &flag);
    return flag;
}

static void weft_hint_mode(MPI_Info info, const char *key, long long *mode) {
    char value[64];
    if (!weft_info_value(info, key, value, (int)sizeof value)) return;
    if (strcmp(value, "enable") == 0) *mode = WEFT_CB_ENABLE;
    else if (strcmp(value, "disable") == 0) *mode = WEFT_CB_DISABLE;
    else if (strcmp(value, "automatic") == 0) *mode = WEFT_CB_AUTOMATIC;
}

static void weft_hint_positive(MPI_Info info, const char *key, long long *out, long long max) {
    char value[64], *end = NULL;
    if (!weft_info_value(info, key, value, (int)sizeof value)) return;
    long long parsed = strtoll(value, &end, 10);
    if (end == value || *end != '\0' || parsed <= 0) return;
    *out = parsed < max ? parsed : max;
}

static void weft_hints_of(const weft_file *file, int nprocs, weft_hints *h) {
    char value[64];
    h->method = WEFT_COLL_METHOD_DEFAULT;
    h->cb_read = h->cb_write = WEFT_CB_AUTOMATIC;
    h->cb_nodes = nprocs;
    h->cb_buffer_size = WEFT_CB_BUFFER_DEFAULT;
    if (weft_info_value(file->info, "weft_coll_method", value, (int)sizeof value)) {
        if (strcmp(value, "two_phase") == 0) h->method = WEFT_METHOD_TWO_PHASE;
        else if (strcmp(value, "datatype") == 0) h->method = WEFT_METHOD_DATATYPE;
    }
    weft_hint_mode(file->info, "romio_cb_read", &h->cb_read);
    weft_hint_mode(file->info, "romio_cb_write", &h->cb_write);
    weft_hint_positive(file->info, "cb_nodes", &h->cb_nodes, nprocs);
    weft_hint_positive(file->info, "cb_buffer_size", &h->cb_buffer_size, WEFT_CB_BUFFER_MAX);
}

static const char *weft_mode_name(long long mode) {
    return mode == WEFT_CB_ENABLE ? "enable" : mode == WEFT_CB_DISABLE ? "disable" : "automatic";
}

/* MPI_File_get_info: the effective collective hints, over what was given. */
void weft_coll_report_hints(weft_file *file, MPI_Info info) {
    int nprocs;
    char value[32];
    weft_hints h;
    PMPI_Comm_size(file->comm, &nprocs);
    weft_hints_of(file, nprocs, &h);
    PMPI_Info_set(info, "weft_coll_method", h.method == WEFT_METHOD_TWO_PHASE ? "two_phase" : "datatype");
    PMPI_Info_set(info, "romio_cb_read", weft_mode_name(h.cb_read));
    PMPI_Info_set(info, "romio_cb_write", weft_mode_name(h.cb_write));
    snprintf(value, sizeof value, "%lld", h.cb_nodes);
    PMPI_Info_set(info, "cb_nodes", value);
    snprintf(value, sizeof value, "%lld", h.cb_buffer_size);
    PMPI_Info_set(info, "cb_buffer_size", value);
}

/* MPI_File_set_info adds hints to those already given (MPI-3.1 13.2.8). */
void weft_info_merge(MPI_Info *into, MPI_Info from) {
    int keys = 0;
    if (from == MPI_INFO_NULL) return;
    if (*into == MPI_INFO_NULL) { PMPI_Info_dup(from, into); return; }
    PMPI_Info_get_nkeys(from, &keys);
    for (int k = 0; k < keys; k++) {
        char key[MPI_MAX_INFO_KEY + 1];
        int len = 0, flag = 0;
        PMPI_Info_get_nthkey(from, k, key);
        PMPI_Info_get_valuelen(from, key, &len, &flag);
        if (!flag) continue;
        char *value = weft_alloc((size_t)len + 1);
        PMPI_Info_get(from, key, len, value, &flag);
        value[len] = '\0';
        if (flag) PMPI_Info_set(*into, key, value);
        free(value);
    }
}

/* Whether some ranks' file ranges overlap (gathered words 0 and 1). */
static int weft_ranges_interleave(const long long *all, int nprocs) {
    for (int a = 0; a < nprocs; a++) {
        const long long *x = all + (size_t)a * WEFT_GATHER_WORDS;
        if (x[1] <= x[0]) continue;
        for (int b = a + 1; b < nprocs; b++) {
            const long long *y = all + (size_t)b * WEFT_GATHER_WORDS;
            if (y[1] > y[0] && x[0] < y[1] && y[0] < x[1]) return 1;
        }
    }
    return 0;
}

/* Per-round exchange arrays (counts and displacements per rank). */
typedef struct {
    int64_t *windows, *counts, *incoming;
    int *send_pairs, *send_pairs_at, *recv_pairs, *recv_pairs_at;
    int *send_bytes, *send_bytes_at, *recv_bytes, *recv_bytes_at;
} weft_exchange;

static void weft_exchange_init(weft_exchange *x, int nprocs) {
    x->windows = weft_alloc(2 * (size_t)nprocs * sizeof(int64_t));
    x->counts = weft_alloc(2 * (size_t)nprocs * sizeof(int64_t));
    x->incoming = weft_alloc(2 * (size_t)nprocs * sizeof(int64_t));
    int **ints[] = {&x->send_pairs, &x->send_pairs_at, &x->recv_pairs, &x->recv_pairs_at,
                    &x->send_bytes, &x->send_bytes_at, &x->recv_bytes, &x->recv_bytes_at};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) *ints[k] = weft_alloc((size_t)nprocs * sizeof(int));
}

static void weft_exchange_free(weft_exchange *x) {
    free(x->windows); free(x->counts); free(x->incoming);
    free(x->send_pairs); free(x->send_pairs_at); free(x->recv_pairs); free(x->recv_pairs_at);
    free(x->send_bytes); free(x->send_bytes_at); free(x->recv_bytes); free(x->recv_bytes_at);
}

/* Counts and displacements from this round's counts; 1 if some total
 * does not fit MPI's int counts. Totals go to `totals[4]`:
 * pair words sent, bytes sent, pair words received, bytes received. */
static int weft_exchange_layout(weft_exchange *x, int nprocs, long long totals[4]) {
    long long t[4] = {0, 0, 0, 0};
    int overflow = 0;
    for (int d = 0; d < nprocs; d++) {
        long long c[4] = {2 * x->counts[2 * d], x->counts[2 * d + 1], 2 * x->incoming[2 * d], x->incoming[2 * d + 1]};
        int *count[4] = {x->send_pairs, x->send_bytes, x->recv_pairs, x->recv_bytes};
        int *at[4] = {x->send_pairs_at, x->send_bytes_at, x->recv_pairs_at, x->recv_bytes_at};
        for (int k = 0; k < 4; k++) {
            if (c[k] < 0 || t[k] + c[k] > INT_MAX) { overflow = 1; continue; }
            count[k][d] = (int)c[k];
            at[k][d] = (int)t[k];
            t[k] += c[k];
        }
    }
    memcpy(totals, t, sizeof t);
    return overflow;
}

static int weft_two_phase(weft_file *file, int write, int explicit_offset, MPI_Offset offset, void *buf, long long count,
                          uint64_t type_id, long long lo, long long hi, int naggs, long long cb, int rc, int64_t *bytes) {
    int nprocs, rank = file->rank;
    PMPI_Comm_size(file->comm, &nprocs);
    uint64_t plan = 0;
    int have_plan = 0, plan_ok = 0, io_error = MPI_SUCCESS;
    if (rc == MPI_SUCCESS) {
        rc = weft_mpi_class(weft_mpiio_coll_begin(file->id, write, explicit_offset, (int64_t)offset, buf, (int64_t)count,
                                                     type_id, (int64_t)lo, (int64_t)hi, &plan));
        have_plan = plan_ok = rc == MPI_SUCCESS;
    }
    /* File domains: boundaries rounded up to the strip size (every rank
     * has the same layout, so every rank computes the same domains). */
    int64_t strip = 1;
    if (weft_mpiio_coll_strip(file->id, &strip) != WEFT_SUCCESS || strip < 1) strip = 1;
    long long *bounds = weft_alloc(((size_t)naggs + 1) * sizeof *bounds);
    long long span = hi - lo, domain = (span + naggs - 1) / naggs;
    bounds[0] = lo;
    for (int k = 1; k < naggs; k++) {
        long long b = lo + k * domain;
        b = (b + strip - 1) / strip * strip;
        if (b > hi) b = hi;
        if (b < bounds[k - 1]) b = bounds[k - 1];
        bounds[k] = b;
    }
    bounds[naggs] = hi;
    long long rounds = 0;
    int my_domain = -1;
    for (int k = 0; k < naggs; k++) {
        long long len = bounds[k + 1] - bounds[k], r = (len + cb - 1) / cb;
        if (r > rounds) rounds = r;
        if ((int)((long long)k * nprocs / naggs) == rank) my_domain = k;
    }
    weft_exchange x;
    weft_exchange_init(&x, nprocs);
    weft_two_phase_calls++;
    for (long long r = 0; r < rounds; r++) {
        memset(x.windows, 0, 2 * (size_t)nprocs * sizeof(int64_t));
        memset(x.counts, 0, 2 * (size_t)nprocs * sizeof(int64_t));
        for (int k = 0; k < naggs; k++) {
            long long wlo = bounds[k] + r * cb, whi = wlo + cb < bounds[k + 1] ? wlo + cb : bounds[k + 1];
            int agg = (int)((long long)k * nprocs / naggs);
            if (wlo < whi) { x.windows[2 * agg] = wlo; x.windows[2 * agg + 1] = whi; }
        }
        const int64_t *out_pairs = NULL;
        const uint8_t *out_data = NULL;
        if (plan_ok) {
            int e = weft_mpi_class(weft_mpiio_coll_round(plan, nprocs, x.windows, x.counts, &out_pairs, &out_data));
            if (e != MPI_SUCCESS) {
                /* This rank stops contributing; the others carry on. */
                rc = e;
                plan_ok = 0;
                memset(x.counts, 0, 2 * (size_t)nprocs * sizeof(int64_t));
            }
        }
        PMPI_Alltoall(x.counts, 2, MPI_LONG_LONG, x.incoming, 2, MPI_LONG_LONG, file->comm);
        long long totals[4];
        int overflow = weft_exchange_layout(&x, nprocs, totals);
        PMPI_Allreduce(MPI_IN_PLACE, &overflow, 1, MPI_INT, MPI_MAX, file->comm);
        if (overflow) {
            /* Overlapping accesses piled more than INT_MAX bytes on one
             * aggregator in one round: every rank stops here. */
            if (rc == MPI_SUCCESS) rc = MPI_ERR_COUNT;
            plan_ok = 0;
            break;
        }
        /* An empty Rust vector's pointer is dangling (address 1 for bytes),
         * and OpenMPI's MPI_IN_PLACE is (void *)1: never pass it. */
        static const int64_t none[2] = {0, 0};
        if (!out_pairs || totals[0] == 0) out_pairs = none;
        if (!out_data || totals[1] == 0) out_data = (const uint8_t *)none;
        int64_t *in_pairs = weft_alloc((size_t)totals[2] * sizeof(int64_t));
        PMPI_Alltoallv(out_pairs, x.send_pairs, x.send_pairs_at, MPI_LONG_LONG, in_pairs, x.recv_pairs, x.recv_pairs_at,
                       MPI_LONG_LONG, file->comm);
        int64_t wlo = x.windows[2 * rank], whi = x.windows[2 * rank + 1];
        uint8_t *in_data = weft_alloc((size_t)totals[3]);
        if (write) {
            PMPI_Alltoallv(out_data, x.send_bytes, x.send_bytes_at, MPI_BYTE, in_data, x.recv_bytes, x.recv_bytes_at,
                           MPI_BYTE, file->comm);
            if (my_domain >= 0 && totals[2] > 0 && io_error == MPI_SUCCESS)
                io_error = weft_mpi_class(weft_mpiio_coll_write_window(file->id, wlo, whi, totals[2] / 2, in_pairs, in_data,
                                                                          totals[3]));
        } else {
            memset(in_data, 0, (size_t)totals[3]);
            if (my_domain >= 0 && totals[2] > 0 && io_error == MPI_SUCCESS)
                io_error = weft_mpi_class(weft_mpiio_coll_read_window(file->id, wlo, whi, totals[2] / 2, in_pairs, in_data,
                                                                         totals[3]));
            uint8_t *back = weft_alloc((size_t)totals[1]);
            PMPI_Alltoallv(in_data, x.recv_bytes, x.recv_bytes_at, MPI_BYTE, back, x.send_bytes, x.send_bytes_at, MPI_BYTE,
                           file->comm);
            if (plan_ok) {
                int e = weft_mpi_class(weft_mpiio_coll_deliver(plan, back, totals[1]));
                if (e != MPI_SUCCESS) { rc = e; plan_ok = 0; }
            }
            free(back);
        }
        free(in_pairs);
        free(in_data);
        weft_rounds++;
    }
    weft_exchange_free(&x);
    free(bounds);
    /* Aggregator errors reach every rank. */
    int failed = io_error != MPI_SUCCESS;
    PMPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, file->comm);
    int64_t moved = 0;
    if (have_plan) {
        int e = weft_mpi_class(weft_mpiio_coll_end(plan, plan_ok && !failed, &moved));
        if (rc == MPI_SUCCESS) rc = e;
    }
    if (rc == MPI_SUCCESS && io_error != MPI_SUCCESS) rc = io_error;
    if (rc == MPI_SUCCESS && failed) rc = MPI_ERR_IO;
    *bytes = rc == MPI_SUCCESS ? moved : 0;
    return rc;
}

int weft_collective(weft_file *file, int write, int explicit_offset, MPI_Offset offset, void *buf, long long count,
                    MPI_Datatype datatype, int64_t *moved) {
    int nprocs;
    PMPI_Comm_size(file->comm, &nprocs);
    /* rfs:/discard: files under ABT (src/remote.rs): a collective read
     * may read through another aggregator than the one that wrote, so
     * every rank's buffered writes of the file land first. */
    int remote = 0;
    if (!write && weft_mpiio_remote_drain(file->id, &remote) == WEFT_SUCCESS && remote) PMPI_Barrier(file->comm);
    weft_hints hints;
    weft_hints_of(file, nprocs, &hints);
    uint64_t type_id = 0;
    int64_t start = 0, end = 0, total = 0, bytes = 0;
    int rc = count < 0 ? MPI_ERR_COUNT : weft_type_id(datatype, &type_id);
    if (rc == MPI_SUCCESS)
        rc = weft_mpi_class(weft_mpiio_coll_range(file->id, write, explicit_offset, (int64_t)offset, (int64_t)count,
                                                     type_id, &start, &end, &total));
    if (rc != MPI_SUCCESS) start = end = total = 0;
    long long mine[WEFT_GATHER_WORDS] = {start, end, hints.method, write ? hints.cb_write : hints.cb_read, hints.cb_nodes,
                                         hints.cb_buffer_size};
    long long *all = weft_alloc((size_t)nprocs * WEFT_GATHER_WORDS * sizeof *all);
    PMPI_Allgather(mine, WEFT_GATHER_WORDS, MPI_LONG_LONG, all, WEFT_GATHER_WORDS, MPI_LONG_LONG, file->comm);
    long long method = all[2], mode = all[3], naggs = all[4], cb = all[5];
    /* Atomic mode (collective, so the same on every rank): each rank's
     * access must go through its byte-range lock, which two-phase's
     * aggregators would bypass; use the datatype method. */
    int atomic = 0;
    if (weft_mpiio_get_atomic(file->id, &atomic) == 0 && atomic) method = WEFT_METHOD_DATATYPE;
    /* The object cache (set up collectively, so on every rank or none)
     * keeps each rank's private bytes in its own memory: no two-phase. */
    if (weft_mpiio_cache_active(file->id)) method = WEFT_METHOD_DATATYPE;
    long long lo = LLONG_MAX, hi = 0;
    for (int p = 0; p < nprocs; p++) {
        const long long *x = all + (size_t)p * WEFT_GATHER_WORDS;
        if (x[1] <= x[0]) continue;
        if (x[0] < lo) lo = x[0];
        if (x[1] > hi) hi = x[1];
    }
    int interleaved = weft_ranges_interleave(all, nprocs);
    free(all);
    if (naggs < 1) naggs = 1;
    if (naggs > nprocs) naggs = nprocs;
    if (cb < 1) cb = WEFT_CB_BUFFER_DEFAULT;
    if (lo >= hi) {
        /* Nobody moves a byte; the allgather was the synchronization. */
        *moved = 0;
        return rc;
    }
    int two_phase = method == WEFT_METHOD_TWO_PHASE && (mode == WEFT_CB_ENABLE || (mode == WEFT_CB_AUTOMATIC && interleaved));
    if (two_phase) {
        rc = weft_two_phase(file, write, explicit_offset, offset, buf, count, type_id, lo, hi, (int)naggs, cb, rc, &bytes);
    } else {
        /* Each rank's own datatype request, then the synchronization a
         * collective implies. */
        weft_datatype_calls++;
        if (rc == MPI_SUCCESS)
            rc = weft_mpi_class(weft_mpiio_io(file->id, write, explicit_offset, (int64_t)offset, buf, (int64_t)count,
                                                 type_id, &bytes));
        PMPI_Barrier(file->comm);
    }
    *moved = rc == MPI_SUCCESS ? bytes : 0;
    return rc;
}
