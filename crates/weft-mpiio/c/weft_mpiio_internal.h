/* Shared between weft_mpiio.c and the generated wrappers of one flavour. */
#ifndef WEFT_MPIIO_INTERNAL_H
#define WEFT_MPIIO_INTERNAL_H
#include <mpi.h>
#include <stdint.h>

/* A Weft file; an MPI_File of a Weft file is a pointer to one of these. */
typedef struct weft_file {
    uint64_t id;            /* Rust file id */
    MPI_Comm comm;          /* dup of the opening communicator */
    int rank;
    int amode;
    MPI_Offset disp;        /* view displacement */
    MPI_Datatype etype, filetype; /* view types (dups of derived types) */
    MPI_Info info;
    MPI_Errhandler errhandler;
    int owns_errhandler;    /* errhandler came from MPI_File_get_errhandler */
    int retired;            /* closed by Weft at MPI_Finalize; kept, never freed */
    struct weft_file *next;
} weft_file;

weft_file *weft_find(MPI_File handle);
int weft_raise(weft_file *file, int code);
int weft_unsupported(weft_file *file, const char *name);
int weft_type_id(MPI_Datatype type, uint64_t *id);
int weft_mpi_class(int weft_class);   /* Weft class (weft_mpiio.h) -> MPI_ERR_* */
int weft_raise_null(int code);        /* raise through the MPI_FILE_NULL handler */
void weft_finalize_files(void);       /* sync, close and retire every open Weft file */
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
int weft_collective(weft_file *file, int write, int explicit_offset, MPI_Offset offset, void *buf,
                    long long count, MPI_Datatype datatype, MPI_Status *status);
void weft_coll_report_hints(weft_file *file, MPI_Info info);
void weft_info_merge(MPI_Info *into, MPI_Info from);
#endif
