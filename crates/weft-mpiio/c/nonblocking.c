/* Nonblocking MPI-IO on Weft files: MPI_File_i{read,write}[_at][_all],
 * the split collectives (*_all_begin/_end, *_at_all_begin/_end; not the
 * ordered ones), the MPI_Wait/MPI_Test family for their requests, and the
 * finalize clean-up of requests. Owns the table of Weft requests and of active split
 * collectives.
 *
 * - A start call checks and plans the access and starts its transfer on
 *   the Rust runtime (src/nonblocking.rs), then creates a real MPI
 *   generalized request (MPI_Grequest_start), so the handle is valid
 *   anywhere in MPI. Weft's runtime threads never call MPI.
 * - Completion happens on the application's thread: the intercepted
 *   MPI_Wait, MPI_Test, MPI_Waitall, MPI_Testall, MPI_Waitany,
 *   MPI_Testany, MPI_Waitsome, MPI_Testsome, MPI_Request_get_status and
 *   MPI_Request_free look the requests up in the table, poll (or wait for)
 *   the Rust operation, call MPI_Grequest_complete once it has finished,
 *   and then hand the whole call to PMPI_, so arrays mixing Weft and other
 *   requests work. Waitany/Waitsome poll Weft operations and PMPI_Test*
 *   in turn with short bounded sleeps.
 * - The query callback fills the status (bytes as MPI_BYTE elements, so
 *   MPI_Get_count works; never cancelled). An error of the transfer is
 *   returned by the completing call through the file's error handler
 *   (the MPI_FILE_NULL handler if the file was closed meanwhile); in the
 *   multiple-completion calls it is also stored in the status's MPI_ERROR
 *   and the call returns MPI_ERR_IN_STATUS. Generalized requests cannot be
 *   cancelled (MPI_Cancel is accepted and has no effect).
 * - Errors found at start (bad count or type, read-only file, ...) are
 *   returned by the start call for independent accesses (as ROMIO does);
 *   a collective start always returns a request (which completes with
 *   the error), so that the other ranks are not left waiting.
 * - Collective nonblocking accesses: each rank starts its own transfer and
 *   a PMPI_Ibarrier on the file's communicator (the collective's
 *   synchronization); the request completes when both have.
 * - Split collectives use the same machinery; one per file at a time (a
 *   second begin, or an end without begin, is MPI_ERR_IO as in ROMIO).
 * - Finalize (c/lifecycle.c): Weft requests still pending are completed
 *   and freed, before the files still open are closed. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include "weft_mpiio.h"
#include "nonblocking.h"
#include "weft_mpiio_internal.h"

/* Longest sleep between two polls of Waitany/Waitsome (nanoseconds). */
#define WEFT_POLL_SLEEP_MAX_NS 1000000L
#define WEFT_POLL_SLEEP_MIN_NS 20000L

typedef struct weft_request {
    MPI_Request handle;   /* the generalized request the application holds */
    uint64_t op;          /* Rust operation id, 0 if none (failed collective start) */
    weft_file *file;      /* for the error handler; checked with weft_find before use */
    MPI_Request barrier;  /* collective synchronization, or MPI_REQUEST_NULL */
    int finished;         /* the transfer has ended (bytes, error are set) */
    int completed;        /* MPI_Grequest_complete has been called */
    int error;            /* MPI error code of the transfer */
    MPI_Count bytes;      /* bytes moved */
    struct weft_request *next;
} weft_request;

static pthread_mutex_t weft_requests_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_request *weft_requests = NULL;
static volatile int weft_requests_len = 0; /* fast path for foreign requests */

static weft_request *weft_request_find(MPI_Request handle) {
    if (weft_requests_len == 0 || handle == MPI_REQUEST_NULL) return NULL;
    weft_request *found = NULL;
    pthread_mutex_lock(&weft_requests_lock);
    for (weft_request *r = weft_requests; r; r = r->next)
        if (r->handle == handle) { found = r; break; }
    pthread_mutex_unlock(&weft_requests_lock);
    return found;
}

/* ---------- generalized request callbacks ---------- */

static int weft_query_fn(void *extra, MPI_Status *status) {
    weft_request *r = extra;
    PMPI_Status_set_elements_x(status, MPI_BYTE, r->error == MPI_SUCCESS ? r->bytes : 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    /* The error is returned by the completing call itself, through the
     * file's handler (MPI would raise it on MPI_COMM_WORLD's). */
    return MPI_SUCCESS;
}

static int weft_free_fn(void *extra) {
    weft_request *r = extra;
    pthread_mutex_lock(&weft_requests_lock);
    for (weft_request **p = &weft_requests; *p; p = &(*p)->next)
        if (*p == r) { *p = r->next; weft_requests_len--; break; }
    pthread_mutex_unlock(&weft_requests_lock);
    if (r->op) weft_mpiio_op_free(r->op);
    free(r);
    return MPI_SUCCESS;
}

static int weft_cancel_fn(void *extra, int complete) {
    (void)extra; (void)complete;
    return MPI_SUCCESS; /* not cancellable: the status says so */
}

/* ---------- completion on the application's thread ---------- */

/* Drives `r` towards completion (waits if `block`); returns 1 once
 * MPI_Grequest_complete has been called on it. */
static int weft_request_progress(weft_request *r, int block) {
    if (r->completed) return 1;
    if (!r->finished) {
        int finished = 0;
        int64_t bytes = 0;
        int class = weft_mpiio_op_poll(r->op, block, &finished, &bytes);
        if (!finished && class == WEFT_SUCCESS) return 0;
        r->finished = 1;
        r->bytes = (MPI_Count)bytes;
        r->error = weft_mpi_class(class);
    }
    if (r->barrier != MPI_REQUEST_NULL) {
        if (block) {
            PMPI_Wait(&r->barrier, MPI_STATUS_IGNORE);
        } else {
            int flag = 0;
            PMPI_Test(&r->barrier, &flag, MPI_STATUS_IGNORE);
            if (!flag) return 0;
        }
    }
    r->completed = 1;
    PMPI_Grequest_complete(r->handle);
    return 1;
}

/* Raises a transfer's error through its file's handler. */
static int weft_request_raise(weft_file *file, int code) {
    if (code == MPI_SUCCESS) return MPI_SUCCESS;
    weft_file *live = weft_find((MPI_File)file);
    return live ? weft_raise(live, code) : weft_raise_null(code);
}

/* Errors of the Weft requests in an array, taken before PMPI frees them. */
typedef struct { int *errors; weft_file **files; int weft; } weft_snapshot;

/* Progresses every Weft request of `requests` (waiting if `block`) and
 * records its error; returns how many are complete. `snap->weft` counts
 * the Weft requests. */
static int weft_progress_all(int count, MPI_Request *requests, int block, weft_snapshot *snap) {
    int ready = 0;
    snap->weft = 0;
    snap->errors = NULL;
    snap->files = NULL;
    if (weft_requests_len == 0 || count <= 0 || !requests) return 0;
    for (int i = 0; i < count; i++) {
        weft_request *r = weft_request_find(requests[i]);
        if (!r) continue;
        if (!snap->errors) {
            snap->errors = calloc((size_t)count, sizeof *snap->errors);
            snap->files = calloc((size_t)count, sizeof *snap->files);
            if (!snap->errors || !snap->files) { free(snap->errors); free(snap->files); snap->errors = NULL; snap->files = NULL; }
        }
        snap->weft++;
        if (weft_request_progress(r, block)) {
            ready++;
            if (snap->errors) { snap->errors[i] = r->error; snap->files[i] = r->file; }
        }
    }
    return ready;
}

static void weft_snapshot_free(weft_snapshot *snap) {
    free(snap->errors);
    free(snap->files);
}

/* After a multiple-completion call: stores the errors of the completed
 * Weft requests `indices` (NULL: all `n`) in their statuses and raises the
 * first one; returns the call's code. */
static int weft_report(weft_snapshot *snap, int rc, int n, const int *indices, MPI_Status *statuses) {
    if (!snap->errors || (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)) return rc;
    int first = -1;
    for (int k = 0; k < n; k++) {
        int i = indices ? indices[k] : k;
        if (i >= 0 && snap->errors[i] != MPI_SUCCESS && first < 0) first = i;
    }
    if (first < 0) return rc;
    if (statuses != MPI_STATUSES_IGNORE) {
        for (int k = 0; k < n; k++) {
            int i = indices ? indices[k] : k;
            if (i < 0) continue;
            if (snap->errors[i] != MPI_SUCCESS) statuses[k].MPI_ERROR = snap->errors[i];
            else if (rc == MPI_SUCCESS) statuses[k].MPI_ERROR = MPI_SUCCESS;
        }
    }
    int code = weft_request_raise(snap->files[first], snap->errors[first]);
    return statuses != MPI_STATUSES_IGNORE ? MPI_ERR_IN_STATUS : code;
}

/* A short pause between two polls, growing up to WEFT_POLL_SLEEP_MAX_NS. */
static void weft_pause(long *sleep_ns) {
    struct timespec t = {0, *sleep_ns};
    nanosleep(&t, NULL);
    if (*sleep_ns < WEFT_POLL_SLEEP_MAX_NS) *sleep_ns *= 2;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    weft_request *r = request ? weft_request_find(*request) : NULL;
    if (!r) return PMPI_Wait(request, status);
    weft_request_progress(r, 1);
    int error = r->error;
    weft_file *file = r->file;
    int rc = PMPI_Wait(request, status);
    return rc == MPI_SUCCESS ? weft_request_raise(file, error) : rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    weft_request *r = request ? weft_request_find(*request) : NULL;
    if (!r) return PMPI_Test(request, flag, status);
    weft_request_progress(r, 0);
    int error = r->error;
    weft_file *file = r->file;
    int rc = PMPI_Test(request, flag, status);
    return rc == MPI_SUCCESS && *flag ? weft_request_raise(file, error) : rc;
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status) {
    weft_request *r = weft_request_find(request);
    if (!r) return PMPI_Request_get_status(request, flag, status);
    weft_request_progress(r, 0);
    int error = r->error;
    weft_file *file = r->file;
    int rc = PMPI_Request_get_status(request, flag, status);
    return rc == MPI_SUCCESS && *flag ? weft_request_raise(file, error) : rc;
}

int MPI_Request_free(MPI_Request *request) {
    weft_request *r = request ? weft_request_find(*request) : NULL;
    /* The transfer still uses the buffer: it is finished first (an error
     * of a freed request is lost, as MPI says). */
    if (r) weft_request_progress(r, 1);
    return PMPI_Request_free(request);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    weft_snapshot snap;
    weft_progress_all(count, requests, 1, &snap);
    if (snap.weft == 0) return PMPI_Waitall(count, requests, statuses);
    int rc = PMPI_Waitall(count, requests, statuses);
    rc = weft_report(&snap, rc, count, NULL, statuses);
    weft_snapshot_free(&snap);
    return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[]) {
    weft_snapshot snap;
    weft_progress_all(count, requests, 0, &snap);
    if (snap.weft == 0) return PMPI_Testall(count, requests, flag, statuses);
    int rc = PMPI_Testall(count, requests, flag, statuses);
    if (*flag) rc = weft_report(&snap, rc, count, NULL, statuses);
    weft_snapshot_free(&snap);
    return rc;
}

/* Testany/Waitany: one completed request `*index` (MPI_UNDEFINED: none). */
static int weft_report_one(weft_snapshot *snap, int rc, int index) {
    if (rc != MPI_SUCCESS || !snap->errors || index == MPI_UNDEFINED || index < 0) return rc;
    return weft_request_raise(snap->files[index], snap->errors[index]);
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status) {
    weft_snapshot snap;
    weft_progress_all(count, requests, 0, &snap);
    if (snap.weft == 0) return PMPI_Testany(count, requests, index, flag, status);
    int rc = PMPI_Testany(count, requests, index, flag, status);
    if (*flag) rc = weft_report_one(&snap, rc, *index);
    weft_snapshot_free(&snap);
    return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status) {
    long sleep_ns = WEFT_POLL_SLEEP_MIN_NS;
    for (;;) {
        weft_snapshot snap;
        int ready = weft_progress_all(count, requests, 0, &snap);
        if (snap.weft == 0) return PMPI_Waitany(count, requests, index, status);
        int rc, flag = 1;
        if (ready) rc = PMPI_Waitany(count, requests, index, status);
        else rc = PMPI_Testany(count, requests, index, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            rc = weft_report_one(&snap, rc, *index);
            weft_snapshot_free(&snap);
            return rc;
        }
        weft_snapshot_free(&snap);
        weft_pause(&sleep_ns);
    }
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]) {
    weft_snapshot snap;
    weft_progress_all(incount, requests, 0, &snap);
    if (snap.weft == 0) return PMPI_Testsome(incount, requests, outcount, indices, statuses);
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (*outcount != MPI_UNDEFINED) rc = weft_report(&snap, rc, *outcount, indices, statuses);
    weft_snapshot_free(&snap);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]) {
    long sleep_ns = WEFT_POLL_SLEEP_MIN_NS;
    for (;;) {
        weft_snapshot snap;
        int ready = weft_progress_all(incount, requests, 0, &snap);
        if (snap.weft == 0) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
        int rc;
        if (ready) rc = PMPI_Waitsome(incount, requests, outcount, indices, statuses);
        else rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) {
            if (*outcount != MPI_UNDEFINED) rc = weft_report(&snap, rc, *outcount, indices, statuses);
            weft_snapshot_free(&snap);
            return rc;
        }
        weft_snapshot_free(&snap);
        weft_pause(&sleep_ns);
    }
}

/* ---------- starting ---------- */

/* An already complete request: class `rc`, `bytes` moved. */
int weft_request_done(weft_file *file, int rc, int64_t bytes, MPI_Request *request) {
    weft_request *r = calloc(1, sizeof *r);
    if (!r) { *request = MPI_REQUEST_NULL; return weft_raise(file, MPI_ERR_INTERN); }
    r->file = file;
    r->barrier = MPI_REQUEST_NULL;
    r->finished = 1;
    r->error = rc;
    r->bytes = (MPI_Count)bytes;
    int grc = PMPI_Grequest_start(weft_query_fn, weft_free_fn, weft_cancel_fn, r, &r->handle);
    if (grc != MPI_SUCCESS) { free(r); *request = MPI_REQUEST_NULL; return weft_raise(file, grc); }
    pthread_mutex_lock(&weft_requests_lock);
    r->next = weft_requests;
    weft_requests = r;
    weft_requests_len++;
    pthread_mutex_unlock(&weft_requests_lock);
    *request = r->handle;
    return MPI_SUCCESS;
}

/* Nonblocking individual-pointer and explicit-offset calls on a file
 * opened with MPI_MODE_SEQUENTIAL. */
static int weft_sequential_refused(MPI_File fh, MPI_Request *request) {
    *request = MPI_REQUEST_NULL;
    return weft_raise((weft_file *)fh, MPI_ERR_UNSUPPORTED_OPERATION);
}

/* Starts an access and returns its request in `*request`; see the top of
 * this file for which errors are returned here. Also for other nonblocking
 * calls (e.g. shared-pointer ones: an explicit offset). */
int weft_istart(MPI_File fh, int write, int explicit_offset, MPI_Offset offset, const void *buf, long long count,
                       MPI_Datatype datatype, int collective, MPI_Request *request) {
    weft_file *file = (weft_file *)fh;
    uint64_t type_id = 0, op = 0;
    if (file->datarep != WEFT_DATAREP_NATIVE && file->datarep != WEFT_DATAREP_INTERNAL) {
        /* A converted representation completes at start (c/datarep.c). */
        int64_t bytes = 0;
        int done = weft_datarep_move(file, write, explicit_offset, offset, buf, count, datatype, collective, &bytes);
        if (done != MPI_SUCCESS && !collective) {
            *request = MPI_REQUEST_NULL;
            return weft_raise(file, done);
        }
        return weft_request_done(file, done, bytes, request);
    }
    int rc = count < 0 ? MPI_ERR_COUNT : weft_type_id(datatype, &type_id);
    if (rc == MPI_SUCCESS)
        rc = weft_mpi_class(weft_mpiio_istart(file->id, write, explicit_offset, (int64_t)offset, (void *)buf,
                                              (int64_t)count, type_id, &op));
    if (rc != MPI_SUCCESS && !collective) {
        *request = MPI_REQUEST_NULL;
        return weft_raise(file, rc);
    }
    weft_request *r = calloc(1, sizeof *r);
    if (!r) {
        if (op) { int finished; int64_t bytes; weft_mpiio_op_poll(op, 1, &finished, &bytes); weft_mpiio_op_free(op); }
        *request = MPI_REQUEST_NULL;
        return weft_raise(file, MPI_ERR_INTERN);
    }
    r->op = op;
    r->file = file;
    r->barrier = MPI_REQUEST_NULL;
    if (rc != MPI_SUCCESS) { r->finished = 1; r->error = rc; }
    if (collective) PMPI_Ibarrier(file->comm, &r->barrier);
    int grc = PMPI_Grequest_start(weft_query_fn, weft_free_fn, weft_cancel_fn, r, &r->handle);
    if (grc != MPI_SUCCESS) {
        /* Without a request the transfer can only be finished here. */
        weft_request_progress(r, 1);
        if (r->op) weft_mpiio_op_free(r->op);
        free(r);
        *request = MPI_REQUEST_NULL;
        return weft_raise(file, grc);
    }
    pthread_mutex_lock(&weft_requests_lock);
    r->next = weft_requests;
    weft_requests = r;
    weft_requests_len++;
    pthread_mutex_unlock(&weft_requests_lock);
    *request = r->handle;
    return MPI_SUCCESS;
}

/* One entry point per MPI call, each two lines into weft_istart (a review
 * with `duplicates` pairs them): the MPI names and signatures must exist
 * one by one, and a macro generating them would hide them from a reader
 * grepping for the MPI call. */
int weft_impl_MPI_File_iread(MPI_File fh, void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 0, 0, 0, buf, count, datatype, 0, request);
}
int weft_impl_MPI_File_iwrite(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 1, 0, 0, buf, count, datatype, 0, request);
}
int weft_impl_MPI_File_iread_at(MPI_File fh, MPI_Offset offset, void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 0, 1, offset, buf, count, datatype, 0, request);
}
int weft_impl_MPI_File_iwrite_at(MPI_File fh, MPI_Offset offset, const void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 1, 1, offset, buf, count, datatype, 0, request);
}
int weft_impl_MPI_File_iread_all(MPI_File fh, void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 0, 0, 0, buf, count, datatype, 1, request);
}
int weft_impl_MPI_File_iwrite_all(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 1, 0, 0, buf, count, datatype, 1, request);
}
int weft_impl_MPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 0, 1, offset, buf, count, datatype, 1, request);
}
int weft_impl_MPI_File_iwrite_at_all(MPI_File fh, MPI_Offset offset, const void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    if (weft_sequential((weft_file *)fh)) return weft_sequential_refused(fh, request);
    return weft_istart(fh, 1, 1, offset, buf, count, datatype, 1, request);
}

/* ---------- split collectives ---------- */

typedef struct weft_split {
    weft_file *file;
    MPI_Request request;
    struct weft_split *next;
} weft_split;

static weft_split *weft_splits = NULL; /* guarded by weft_requests_lock */


static int weft_split_begin(MPI_File fh, int write, int explicit_offset, MPI_Offset offset, const void *buf, long long count,
                            MPI_Datatype datatype) {
    weft_file *file = (weft_file *)fh;
    int active = 0;
    if (weft_sequential(file)) return weft_raise(file, MPI_ERR_UNSUPPORTED_OPERATION);
    pthread_mutex_lock(&weft_requests_lock);
    for (weft_split *s = weft_splits; s; s = s->next)
        if (s->file == file) active = 1;
    pthread_mutex_unlock(&weft_requests_lock);
    /* ROMIO: "Only one active split collective I/O operation is allowed per file handle" */
    if (active) return weft_raise(file, MPI_ERR_IO);
    weft_split *split = calloc(1, sizeof *split);
    if (!split) return weft_raise(file, MPI_ERR_INTERN);
    int rc = weft_istart(fh, write, explicit_offset, offset, buf, count, datatype, 1, &split->request);
    if (rc != MPI_SUCCESS || split->request == MPI_REQUEST_NULL) { free(split); return rc; }
    split->file = file;
    pthread_mutex_lock(&weft_requests_lock);
    split->next = weft_splits;
    weft_splits = split;
    pthread_mutex_unlock(&weft_requests_lock);
    return MPI_SUCCESS;
}

static int weft_split_end(MPI_File fh, MPI_Status *status) {
    weft_file *file = (weft_file *)fh;
    weft_split *found = NULL;
    pthread_mutex_lock(&weft_requests_lock);
    for (weft_split **p = &weft_splits; *p; p = &(*p)->next)
        if ((*p)->file == file) { found = *p; *p = found->next; break; }
    pthread_mutex_unlock(&weft_requests_lock);
    /* ROMIO: "No previous split collective begin" */
    if (!found) return weft_raise(file, MPI_ERR_IO);
    MPI_Request request = found->request;
    free(found);
    return MPI_Wait(&request, status);
}

int weft_impl_MPI_File_read_all_begin(MPI_File fh, void *buf, long long count, MPI_Datatype datatype) {
    return weft_split_begin(fh, 0, 0, 0, buf, count, datatype);
}
int weft_impl_MPI_File_write_all_begin(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype) {
    return weft_split_begin(fh, 1, 0, 0, buf, count, datatype);
}
int weft_impl_MPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void *buf, long long count, MPI_Datatype datatype) {
    return weft_split_begin(fh, 0, 1, offset, buf, count, datatype);
}
int weft_impl_MPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset, const void *buf, long long count, MPI_Datatype datatype) {
    return weft_split_begin(fh, 1, 1, offset, buf, count, datatype);
}
int weft_impl_MPI_File_read_all_end(MPI_File fh, void *buf, MPI_Status *status) {
    (void)buf;
    return weft_split_end(fh, status);
}
int weft_impl_MPI_File_write_all_end(MPI_File fh, const void *buf, MPI_Status *status) {
    (void)buf;
    return weft_split_end(fh, status);
}
int weft_impl_MPI_File_read_at_all_end(MPI_File fh, void *buf, MPI_Status *status) {
    (void)buf;
    return weft_split_end(fh, status);
}
int weft_impl_MPI_File_write_at_all_end(MPI_File fh, const void *buf, MPI_Status *status) {
    (void)buf;
    return weft_split_end(fh, status);
}

/* ---------- finalize ---------- */

/* Finalize (c/lifecycle.c, before the files are closed): pending Weft
 * requests finish their transfers and are completed and freed (the
 * application can no longer use them after finalize). */
void weft_finalize_requests(void) {
    for (;;) {
        weft_request *r = NULL;
        pthread_mutex_lock(&weft_requests_lock);
        r = weft_requests;
        pthread_mutex_unlock(&weft_requests_lock);
        if (!r) break;
        weft_request_progress(r, 1);
        MPI_Request handle = r->handle;
        PMPI_Request_free(&handle); /* runs weft_free_fn, which unlinks r */
    }
    pthread_mutex_lock(&weft_requests_lock);
    while (weft_splits) {
        weft_split *s = weft_splits;
        weft_splits = s->next;
        free(s);
    }
    pthread_mutex_unlock(&weft_requests_lock);
}
