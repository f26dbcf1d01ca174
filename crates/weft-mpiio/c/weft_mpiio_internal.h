/* Shared between weft_mpiio.c and the generated wrappers of one flavour. */
#ifndef WEFT_MPIIO_INTERNAL_H
#define WEFT_MPIIO_INTERNAL_H
#include <mpi.h>
#include <stdint.h>
/* Generated per flavour (gen/<flavour>/real.h): this library exports
 * PMPI_File_* too, so the sources' calls to PMPI_File_X are redirected to
 * weft_real_PMPI_File_X, the MPI library's own, found with dlsym(RTLD_NEXT);
 * and the handwritten entry points' bodies weft_hw_MPI_File_*. */
#include "real.h"

/* A Weft file; an MPI_File of a Weft file is a pointer to one of these. */
typedef struct weft_file {
    uint64_t id;            /* Rust file id */
    MPI_Comm comm;          /* dup of the opening communicator */
    int rank;
    int amode;
    MPI_Offset disp;        /* view displacement */
    MPI_Datatype etype, filetype; /* view types (dups of derived types) */
    int datarep;            /* WEFT_DATAREP_* of the view (c/datarep.c) */
    void *datarep_user;     /* the registered representation, for WEFT_DATAREP_USER */
    MPI_Info info;
    MPI_Errhandler errhandler;
    int owns_errhandler;    /* errhandler came from MPI_File_get_errhandler */
    int retired;            /* closed by Weft at MPI_Finalize; kept, never freed */
    struct weft_file *next;
} weft_file;

weft_file *weft_find(MPI_File handle);
/* MPI_MODE_SEQUENTIAL: individual-pointer and explicit-offset access
 * (blocking, nonblocking, collective, split), seek and set_size are not
 * allowed (MPI_ERR_UNSUPPORTED_OPERATION, as ROMIO; ROMIO allows
 * get_position, get_byte_offset and preallocate); 1 if `file` is such. */
#define weft_sequential(file) (((file)->amode & MPI_MODE_SEQUENTIAL) != 0)
int weft_raise(weft_file *file, int code);
int weft_unsupported(weft_file *file, const char *name);
int weft_type_id(MPI_Datatype type, uint64_t *id);
int weft_mpi_class(int weft_class);   /* Weft class (weft_mpiio.h) -> MPI_ERR_* */
int weft_raise_null(int code);        /* raise through the MPI_FILE_NULL handler */
void weft_finalize_files(void);       /* sync, close and retire every open Weft file */
/* c/remote.c: rfs: and discard: names (src/remote.rs). */
int weft_remote_is_name(const char *name);
int weft_remote_open(weft_file *file, MPI_Info info); /* hints, then the layers */
int weft_remote_finalize(void);       /* ABT's buffered work; deferred errors */
int weft_retired_call(weft_file *file, const char *name); /* a call on a retired file: MPI_ERR_FILE */
/* c/lifecycle.c: Weft's clean-up as an MPI_COMM_SELF attribute (at
 * MPI_Init, else at the first open), run by MPI inside MPI_Finalize. */
void weft_finalize_register(void);
void weft_finalize_requests(void);   /* c/nonblocking.c: complete and free pending requests */
/* c/nonblocking.c: starts a background access as an MPI request. */
int weft_istart(MPI_File fh, int write, int explicit_offset, MPI_Offset offset, const void *buf, long long count,
                MPI_Datatype datatype, int collective, MPI_Request *request);
/* Shared file pointer hooks (shared.c): collective at open, close, set_view. */
void weft_shared_setup(MPI_Comm comm, int rank, uint64_t id, int attached);
void weft_shared_teardown(weft_file *file);
int weft_shared_view_reset(weft_file *file);
/* Collective data access and its hints (c/collective.c). */
/* Returns the MPI class (not raised) and the bytes moved. */
int weft_collective(weft_file *file, int write, int explicit_offset, MPI_Offset offset, void *buf,
                    long long count, MPI_Datatype datatype, int64_t *bytes);
void weft_coll_report_hints(weft_file *file, MPI_Info info);
void weft_info_merge(MPI_Info *into, MPI_Info from);
/* One access in native bytes, independent or collective: the MPI class
 * (not raised) and the bytes moved (c/weft_mpiio.c). */
int weft_move(weft_file *file, int write, int explicit_offset, MPI_Offset offset, const void *buf, long long count,
              MPI_Datatype datatype, int collective, int64_t *bytes);
/* The object cache (c/objects.c): hints, and the closing exchange of set_view. */
void weft_apply_cache_hints(weft_file *file, MPI_Info info);
int weft_objects_exchange(weft_file *file, int ok);
/* Data representations (c/datarep.c). */
enum { WEFT_DATAREP_NATIVE = 0, WEFT_DATAREP_INTERNAL = 1, WEFT_DATAREP_EXTERNAL32 = 2, WEFT_DATAREP_USER = 3 };
int weft_datarep_of(const char *name, int *datarep, void **user);
const char *weft_datarep_name(const weft_file *file);
int weft_datarep_check_view(int datarep, void *user, MPI_Datatype etype, MPI_Datatype filetype);
int weft_datarep_type_extent(const weft_file *file, MPI_Datatype type, MPI_Count *extent);
/* weft_move through the file's representation (converting on the client). */
int weft_datarep_move(weft_file *file, int write, int explicit_offset, MPI_Offset offset, const void *buf,
                      long long count, MPI_Datatype datatype, int collective, int64_t *bytes);
/* c/nonblocking.c: an already complete request (class rc, bytes moved). */
int weft_request_done(weft_file *file, int rc, int64_t bytes, MPI_Request *request);
#endif
