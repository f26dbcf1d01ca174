/* Shared file pointers, ordered access and atomic mode for Weft files
 * (the C half of src/shared.rs).
 *
 * - Open: rank 0 opens a session on the file at its metadata server and
 *   broadcasts its id; every rank attaches it (weft_shared_setup). The
 *   pointer counts etypes of the current view; set_view resets it.
 * - read_shared / write_shared: one fetch-and-add of the access's etypes,
 *   then an explicit-offset access at the old value.
 * - read_ordered / write_ordered: MPI_Exscan of the ranks' etypes, one
 *   fetch-and-add of the total by the last rank, a broadcast of the base;
 *   each rank then accesses base + its prefix, so data lands in rank order.
 *   The _begin/_end forms do the work in begin and keep the status for end.
 * - seek_shared: barrier, rank 0 moves the pointer, broadcast of the result.
 * - set_atomicity: every rank switches (opening its lock session); from
 *   then on every access of the file takes a byte-range lock (src/file.rs). */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "weft_mpiio.h"
#include "weft_mpiio_internal.h"
#include "weft_shared.h"

/* The MPI class of a Weft class: weft_mpiio.c's mapping. */
#define shared_class weft_mpi_class

/* ---------- lifecycle hooks (called from weft_mpiio.c) ---------- */

/* Collective, at open: rank 0 opens the session, everyone attaches it.
 * A failure leaves the file usable without a shared pointer (shared-pointer
 * calls then fail with MPI_ERR_IO). */
void weft_shared_setup(MPI_Comm comm, int rank, uint64_t id, int attached) {
    /* msg[0]: session id (0 = none), msg[1]: lease in ms */
    unsigned long long msg[2] = {0, 0};
    if (rank == 0 && attached) {
        uint64_t session = 0, lease = 0;
        if (weft_mpiio_shared_open(id, &session, &lease) == WEFT_SUCCESS) {
            msg[0] = session;
            msg[1] = lease;
        }
    }
    PMPI_Bcast(msg, 2, MPI_UNSIGNED_LONG_LONG, 0, comm);
    if (rank != 0 && attached) weft_mpiio_shared_attach(id, msg[0], msg[1]);
}

/* Collective, at close after the first barrier: nobody uses the pointer any more. */
void weft_shared_teardown(weft_file *file) {
    weft_mpiio_shared_close(file->id, file->rank == 0);
}

/* Collective, in set_view: the shared pointer goes back to 0 once every
 * rank has finished its earlier shared-pointer accesses. */
int weft_shared_view_reset(weft_file *file) {
    int rc = MPI_SUCCESS;
    PMPI_Barrier(file->comm);
    if (file->rank == 0) rc = shared_class(weft_mpiio_shared_set(file->id, 0));
    PMPI_Bcast(&rc, 1, MPI_INT, 0, file->comm);
    return rc;
}

/* ---------- data ---------- */

static void shared_status(MPI_Status *status, int rc, int64_t bytes) {
    if (status == MPI_STATUS_IGNORE) return;
    PMPI_Status_set_elements_x(status, MPI_BYTE, rc == MPI_SUCCESS ? (MPI_Count)bytes : 0);
    PMPI_Status_set_cancelled(status, 0);
}

/* Validates an access; stores its type id and size in etypes. */
static int shared_prepare(weft_file *file, long long count, MPI_Datatype datatype, uint64_t *type_id, int64_t *etypes) {
    if (count < 0) return MPI_ERR_COUNT;
    int rc = weft_type_id(datatype, type_id);
    if (rc == MPI_SUCCESS) rc = shared_class(weft_mpiio_shared_etypes(file->id, count, *type_id, etypes));
    return rc;
}

static int shared_individual(MPI_File fh, int write, const void *buf, long long count, MPI_Datatype datatype,
                             MPI_Status *status) {
    weft_file *file = (weft_file *)fh;
    uint64_t type_id = 0;
    int64_t etypes = 0, at = 0, bytes = 0;
    int rc = shared_prepare(file, count, datatype, &type_id, &etypes);
    if (rc == MPI_SUCCESS && etypes > 0) rc = shared_class(weft_mpiio_shared_fetch_add(file->id, etypes, &at));
    if (rc == MPI_SUCCESS && etypes > 0) rc = weft_datarep_move(file, write, 1, at, buf, count, datatype, 0, &bytes);
    shared_status(status, rc, bytes);
    return weft_raise(file, rc);
}

/* Ordered access; returns the MPI class and the bytes moved (not raised). */
static int shared_ordered(weft_file *file, int write, const void *buf, long long count, MPI_Datatype datatype,
                          int64_t *bytes) {
    uint64_t type_id = 0;
    int64_t etypes = 0;
    int size = 1;
    *bytes = 0;
    int rc = shared_prepare(file, count, datatype, &type_id, &etypes);
    long long mine = rc == MPI_SUCCESS ? (long long)etypes : 0, prefix = 0;
    PMPI_Comm_size(file->comm, &size);
    PMPI_Exscan(&mine, &prefix, 1, MPI_LONG_LONG, MPI_SUM, file->comm);
    if (file->rank == 0) prefix = 0; /* MPI_Exscan leaves rank 0's result undefined */
    /* msg[0]: base of the whole ordered access, msg[1]: MPI class of the fetch-and-add */
    long long msg[2] = {0, MPI_SUCCESS};
    if (file->rank == size - 1 && prefix + mine > 0) {
        int64_t base = 0;
        msg[1] = shared_class(weft_mpiio_shared_fetch_add(file->id, prefix + mine, &base));
        msg[0] = base;
    }
    PMPI_Bcast(msg, 2, MPI_LONG_LONG, size - 1, file->comm);
    if (rc == MPI_SUCCESS) rc = (int)msg[1];
    if (rc == MPI_SUCCESS && mine > 0)
        rc = weft_datarep_move(file, write, 1, msg[0] + prefix, buf, count, datatype, 0, bytes);
    PMPI_Barrier(file->comm);
    return rc;
}

int weft_impl_MPI_File_read_shared(MPI_File fh, void *buf, long long count, MPI_Datatype datatype, MPI_Status *status) {
    return shared_individual(fh, 0, buf, count, datatype, status);
}

int weft_impl_MPI_File_write_shared(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype,
                                    MPI_Status *status) {
    return shared_individual(fh, 1, buf, count, datatype, status);
}

/* Nonblocking shared-pointer access: the fetch-and-add of the shared
 * pointer happens at start (one round trip on the caller's thread, which
 * fixes this access's place in the file as MPI requires), the data then
 * moves in the background like any nonblocking access (c/nonblocking.c). */
static int shared_istart(MPI_File fh, int write, const void *buf, long long count, MPI_Datatype datatype,
                         MPI_Request *request) {
    weft_file *file = (weft_file *)fh;
    uint64_t type_id = 0;
    int64_t etypes = 0, at = 0;
    int rc = shared_prepare(file, count, datatype, &type_id, &etypes);
    if (rc == MPI_SUCCESS && etypes > 0) rc = shared_class(weft_mpiio_shared_fetch_add(file->id, etypes, &at));
    if (rc != MPI_SUCCESS) {
        *request = MPI_REQUEST_NULL;
        return weft_raise(file, rc);
    }
    return weft_istart(fh, write, 1, (MPI_Offset)at, buf, count, datatype, 0, request);
}

int weft_impl_MPI_File_iread_shared(MPI_File fh, void *buf, long long count, MPI_Datatype datatype, MPI_Request *request) {
    return shared_istart(fh, 0, buf, count, datatype, request);
}

int weft_impl_MPI_File_iwrite_shared(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype,
                                     MPI_Request *request) {
    return shared_istart(fh, 1, buf, count, datatype, request);
}

int weft_impl_MPI_File_read_ordered(MPI_File fh, void *buf, long long count, MPI_Datatype datatype, MPI_Status *status) {
    weft_file *file = (weft_file *)fh;
    int64_t bytes = 0;
    int rc = shared_ordered(file, 0, buf, count, datatype, &bytes);
    shared_status(status, rc, bytes);
    return weft_raise(file, rc);
}

int weft_impl_MPI_File_write_ordered(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype,
                                     MPI_Status *status) {
    weft_file *file = (weft_file *)fh;
    int64_t bytes = 0;
    int rc = shared_ordered(file, 1, buf, count, datatype, &bytes);
    shared_status(status, rc, bytes);
    return weft_raise(file, rc);
}

/* ---------- split ordered collectives ---------- */

/* One pending split collective per file (MPI allows no more). */
typedef struct shared_split {
    weft_file *file;
    int rc;
    int64_t bytes;
    struct shared_split *next;
} shared_split;

static pthread_mutex_t split_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_split *splits = NULL;

static shared_split **split_find(weft_file *file) {
    shared_split **p = &splits;
    while (*p && (*p)->file != file) p = &(*p)->next;
    return p;
}

/* Keeps its split state in a list as c/nonblocking.c's split collectives
 * do (a review with `duplicates` pairs the pushes): the two hold different
 * records (an ordered access's result here, a request there). */
static int split_begin(MPI_File fh, int write, const void *buf, long long count, MPI_Datatype datatype) {
    weft_file *file = (weft_file *)fh;
    pthread_mutex_lock(&split_lock);
    int busy = *split_find(file) != NULL;
    pthread_mutex_unlock(&split_lock);
    /* Every rank of a correct program agrees on this, so returning before
     * the collective part cannot leave the others waiting. */
    if (busy) return weft_raise(file, MPI_ERR_OTHER);
    shared_split *split = calloc(1, sizeof *split);
    if (!split) return weft_raise(file, MPI_ERR_INTERN);
    split->file = file;
    split->rc = shared_ordered(file, write, buf, count, datatype, &split->bytes);
    pthread_mutex_lock(&split_lock);
    split->next = splits;
    splits = split;
    pthread_mutex_unlock(&split_lock);
    /* Errors of the access are reported by _end, with its status. */
    return MPI_SUCCESS;
}

static int split_end(MPI_File fh, MPI_Status *status) {
    weft_file *file = (weft_file *)fh;
    pthread_mutex_lock(&split_lock);
    shared_split **p = split_find(file);
    shared_split *split = *p;
    if (split) *p = split->next;
    pthread_mutex_unlock(&split_lock);
    if (!split) return weft_raise(file, MPI_ERR_OTHER); /* no begin */
    int rc = split->rc;
    shared_status(status, rc, split->bytes);
    free(split);
    return weft_raise(file, rc);
}

int weft_impl_MPI_File_read_ordered_begin(MPI_File fh, void *buf, long long count, MPI_Datatype datatype) {
    return split_begin(fh, 0, buf, count, datatype);
}

int weft_impl_MPI_File_read_ordered_end(MPI_File fh, void *buf, MPI_Status *status) {
    (void)buf;
    return split_end(fh, status);
}

int weft_impl_MPI_File_write_ordered_begin(MPI_File fh, const void *buf, long long count, MPI_Datatype datatype) {
    return split_begin(fh, 1, buf, count, datatype);
}

int weft_impl_MPI_File_write_ordered_end(MPI_File fh, const void *buf, MPI_Status *status) {
    (void)buf;
    return split_end(fh, status);
}

/* ---------- pointer ---------- */

int weft_impl_MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
    weft_file *file = (weft_file *)fh;
    int w = whence == MPI_SEEK_SET ? 0 : whence == MPI_SEEK_CUR ? 1 : whence == MPI_SEEK_END ? 2 : -1;
    int rc = MPI_SUCCESS;
    /* Every rank's earlier shared-pointer accesses are done before the move. */
    PMPI_Barrier(file->comm);
    if (file->rank == 0) rc = shared_class(weft_mpiio_shared_seek(file->id, (int64_t)offset, w));
    PMPI_Bcast(&rc, 1, MPI_INT, 0, file->comm);
    return weft_raise(file, rc);
}

/* Same shape as weft_impl_MPI_File_get_size in c/weft_mpiio.c (call the
 * Rust side, copy the value out, raise): two MPI calls, two Rust calls. */
int weft_impl_MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset) {
    weft_file *file = (weft_file *)fh;
    int64_t position = 0;
    int rc = shared_class(weft_mpiio_shared_get(file->id, &position));
    if (rc == MPI_SUCCESS) *offset = (MPI_Offset)position;
    return weft_raise(file, rc);
}

/* ---------- atomic mode ---------- */

int weft_impl_MPI_File_set_atomicity(MPI_File fh, int flag) {
    weft_file *file = (weft_file *)fh;
    int rc = shared_class(weft_mpiio_set_atomic(file->id, flag != 0)), all = MPI_SUCCESS;
    /* Collective: nobody goes on until every rank has switched. */
    PMPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, file->comm);
    if (rc == MPI_SUCCESS && all != MPI_SUCCESS) rc = MPI_ERR_IO; /* another rank failed */
    return weft_raise(file, rc);
}

int weft_impl_MPI_File_get_atomicity(MPI_File fh, int *flag) {
    weft_file *file = (weft_file *)fh;
    int on = 0;
    int rc = shared_class(weft_mpiio_get_atomic(file->id, &on));
    if (rc == MPI_SUCCESS) *flag = on;
    return weft_raise(file, rc);
}
