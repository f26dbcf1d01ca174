/*
 * weft.h - C API of the Weft parallel file system client (libweft.so).
 *
 * Hand-written; keep in sync with crates/weft-capi (the Rust exports).
 * The test crates/weft-capi/tests/c_example.rs checks that every function
 * declared here is exported by libweft.so and the other way round, and
 * the struct sizes are asserted on both sides.
 *
 * Build against it:
 *   cargo build --release -p weft-capi
 *   gcc -O2 -Wall -Werror -I include prog.c -L target/release -lweft \
 *       -Wl,-rpath,$PWD/target/release -o prog
 *
 * CONVENTIONS
 *   - Every function returns 0 (or a non-negative count) on success and
 *     -errno on failure, e.g. -ENOENT. weft_strerror() describes an error
 *     given with either sign. errno itself is never set.
 *   - A NULL pointer argument gives -EINVAL, as do a path that is not
 *     UTF-8, a negative offset or size, and unsupported open flags.
 *   - Handles are opaque and checked on every call: a closed, stale,
 *     forged or wrong-kind handle gives -EBADF (NULL gives -EINVAL).
 *   - Paths are absolute within the file system; "weft:/a/b" and "/a/b"
 *     name the same object. Relative paths are taken from the root.
 *   - Calls block the calling thread. Every handle may be used from
 *     several threads at once.
 *   - An internal failure (a Rust panic) is caught and reported as -EIO.
 *   - Nothing is cached or buffered: a successful weft_pwrite is visible
 *     to every client; weft_fsync makes it durable.
 *   - Datatypes (weft_type_t) are immutable handles like the others: a
 *     freed type gives -EBADF. A constructor copies what it needs from
 *     its children, so they may be freed right after it returns.
 *
 * FUNCTIONS
 *   Connection:   weft_connect, weft_disconnect
 *   Files:        weft_open, weft_create, weft_pread, weft_pwrite,
 *                 weft_fsync, weft_ftruncate, weft_fstat, weft_close
 *   Namespace:    weft_stat, weft_lstat, weft_truncate, weft_unlink,
 *                 weft_mkdir, weft_rmdir, weft_rename, weft_symlink,
 *                 weft_readlink
 *   Directories:  weft_opendir, weft_readdir, weft_closedir
 *   Noncontiguous I/O: weft_pread_list, weft_pwrite_list,
 *                 weft_read_dtype, weft_write_dtype, weft_set_io_method
 *   Datatypes:    weft_type_bytes, weft_type_contiguous, weft_type_vector,
 *                 weft_type_hvector, weft_type_indexed, weft_type_hindexed,
 *                 weft_type_indexed_block, weft_type_hindexed_block,
 *                 weft_type_struct, weft_type_resized, weft_type_subarray,
 *                 weft_type_darray, weft_type_size, weft_type_extent,
 *                 weft_type_free
 *   Space:        weft_statfs, weft_statfs_servers
 *   Errors:       weft_strerror
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Types                                                               */
/* ------------------------------------------------------------------ */

/* A connection to one file system. */
typedef struct weft_fs_t weft_fs_t;
/* An open file. */
typedef struct weft_file_t weft_file_t;
/* An open directory stream. */
typedef struct weft_dir_t weft_dir_t;
/* An immutable datatype: a pattern of bytes in memory or in a file. */
typedef struct weft_type_t weft_type_t;

/* Attributes of one object (64 bytes). */
struct weft_stat {
    uint64_t handle;       /* object handle: unique, never reused */
    uint64_t size;         /* file: bytes; symlink: target length;
                              directory: number of entries */
    int64_t atime_ns;      /* access time, ns since the Unix epoch */
    int64_t mtime_ns;      /* modification time, ns since the epoch */
    int64_t ctime_ns;      /* change time, ns since the epoch */
    uint64_t strip_bytes;  /* file: strip size; otherwise 0 */
    uint32_t stripe_count; /* file: number of datafiles; otherwise 0 */
    uint32_t mode;         /* S_IFREG / S_IFDIR / S_IFLNK | permission bits */
    uint32_t uid;          /* owner */
    uint32_t gid;          /* group */
};

/* Space of the whole file system (32 bytes). */
struct weft_statfs {
    uint64_t bytes_total;  /* sum over servers */
    uint64_t bytes_free;   /* sum over servers */
    uint64_t objects;      /* objects stored, sum over servers */
    uint32_t server_count; /* number of servers */
    uint32_t reserved;     /* 0 */
};

/* Space of one server (32 bytes). */
struct weft_server_statfs {
    uint64_t bytes_total;
    uint64_t bytes_free;
    uint64_t objects;
    uint32_t server_id;
    uint32_t reserved;     /* 0 */
};

/* Entry types of struct weft_dirent (the DT_* values of <dirent.h>). */
#define WEFT_DT_UNKNOWN 0
#define WEFT_DT_DIR 4
#define WEFT_DT_REG 8
#define WEFT_DT_LNK 10

/* Longest name of a directory entry, in bytes. */
#define WEFT_NAME_MAX 255

/* One directory entry (272 bytes). */
struct weft_dirent {
    uint64_t handle;                /* handle of the entry's object */
    uint32_t type;                  /* WEFT_DT_* */
    uint32_t name_bytes;            /* strlen(name) */
    char name[WEFT_NAME_MAX + 1];   /* NUL-terminated */
};

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
_Static_assert(sizeof(struct weft_stat) == 64, "struct weft_stat must match libweft");
_Static_assert(sizeof(struct weft_statfs) == 32, "struct weft_statfs must match libweft");
_Static_assert(sizeof(struct weft_server_statfs) == 32, "struct weft_server_statfs must match libweft");
_Static_assert(sizeof(struct weft_dirent) == 272, "struct weft_dirent must match libweft");
#endif

/* ------------------------------------------------------------------ */
/* Connection                                                          */
/* ------------------------------------------------------------------ */

/* Connects to the file system described by the TOML configuration at
 * config_path (NULL: the path in $WEFT_CONFIG; -EINVAL if unset). On
 * success *out is a handle to release with weft_disconnect; on failure
 * *out is NULL. Servers are contacted lazily, by the first operation.
 * Errors: -ENOENT/-EACCES (config unreadable), -EINVAL (config invalid). */
int weft_connect(const char *config_path, weft_fs_t **out);

/* Releases a connection. Files and directory streams opened through it
 * stay usable until closed. */
int weft_disconnect(weft_fs_t *fs);

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/* Opens a file. flags: exactly one of O_RDONLY, O_WRONLY, O_RDWR, plus
 *   O_CREAT   create if missing (permission bits: mode, no umask),
 *   O_EXCL    with O_CREAT: fail with -EEXIST if it exists,
 *   O_TRUNC   set the size to 0 (needs O_WRONLY or O_RDWR),
 *   O_APPEND  every weft_pwrite goes to the end of the file,
 *   O_SYNC / O_DSYNC  every weft_pwrite is followed by weft_fsync.
 * O_CLOEXEC, O_NOCTTY, O_NONBLOCK, O_LARGEFILE, O_NOATIME are ignored;
 * any other flag gives -EINVAL. A new file gets the layout its directory
 * sets, else the configuration's. Errors include -ENOENT, -EEXIST,
 * -EISDIR, -EACCES, -ENOTDIR. On failure *out is NULL. */
int weft_open(weft_fs_t *fs, const char *path, int flags, uint32_t mode,
              weft_file_t **out);

/* Like weft_open with O_CREAT implied, choosing the layout of a new file:
 * strip_bytes per strip and stripe_count datafiles (0: the default; a
 * count above the number of data servers is reduced to it). The layout
 * applies only if this call creates the file. Errors as weft_open, and
 * -EINVAL for a strip size outside the limits. */
int weft_create(weft_fs_t *fs, const char *path, int flags, uint32_t mode,
                uint64_t strip_bytes, uint32_t stripe_count,
                weft_file_t **out);

/* Reads up to count bytes at offset. Returns the bytes read: count, fewer
 * only at the end of the file, 0 at or past it. Holes read as zeros.
 * -EBADF if the file is not open for reading. */
ssize_t weft_pread(weft_file_t *file, void *buffer, size_t count,
                   int64_t offset);

/* Writes count bytes at offset (at the end of the file with O_APPEND;
 * concurrent appenders may overlap). Returns count: a write completes or
 * fails. -EBADF if not open for writing, -EFBIG past the size limit.
 * After a write, fsync or truncate through this file failed, further
 * writes, fsyncs and truncates through it fail with -EIO. */
ssize_t weft_pwrite(weft_file_t *file, const void *buffer, size_t count,
                    int64_t offset);

/* Makes the file's bytes durable on every server holding them. */
int weft_fsync(weft_file_t *file);

/* Sets the size of an open file (-EBADF if not open for writing). */
int weft_ftruncate(weft_file_t *file, int64_t size);

/* Attributes of an open file. */
int weft_fstat(weft_file_t *file, struct weft_stat *out);

/* Closes a file. Nothing is buffered, so this neither flushes nor syncs. */
int weft_close(weft_file_t *file);

/* ------------------------------------------------------------------ */
/* Datatypes                                                           */
/* ------------------------------------------------------------------ */

/* A datatype describes where the bytes of an access lie, as an MPI
 * datatype does: its size (data bytes of one instance), lower bound and
 * extent (instance i of a count starts at i * extent). Every constructor
 * stores a new handle in *out (NULL on failure) to release with
 * weft_type_free, and returns 0, -EINVAL for bad arguments (including a
 * NULL array with a non-zero count, zero dimensions, a bad order or
 * distribution, or a type beyond the limits: 64 levels of nesting,
 * 2^20 displacement entries), -EOVERFLOW when a size, bound or
 * displacement overflows 64 bits, or -EBADF for a freed child. */

/* Array orders of weft_type_subarray and weft_type_darray. */
#define WEFT_ORDER_C 0        /* row-major: last index fastest */
#define WEFT_ORDER_FORTRAN 1  /* column-major: first index fastest */

/* Distributions of weft_type_darray (MPI_DISTRIBUTE_*). */
#define WEFT_DISTRIBUTE_NONE 0
#define WEFT_DISTRIBUTE_BLOCK 1
#define WEFT_DISTRIBUTE_CYCLIC 2
/* The default distribution argument (MPI_DISTRIBUTE_DFLT_DARG). */
#define WEFT_DARG_DEFAULT (-1)

/* size contiguous bytes: a basic type (8 for a double). */
int weft_type_bytes(uint64_t size, weft_type_t **out);

/* count consecutive instances of child (MPI_Type_contiguous). */
int weft_type_contiguous(uint64_t count, const weft_type_t *child,
                         weft_type_t **out);

/* count blocks of blocklength children; block starts are stride child
 * extents apart (MPI_Type_vector). */
int weft_type_vector(uint64_t count, uint64_t blocklength, int64_t stride,
                     const weft_type_t *child, weft_type_t **out);

/* As weft_type_vector with the stride in bytes (MPI_Type_create_hvector). */
int weft_type_hvector(uint64_t count, uint64_t blocklength,
                      int64_t stride_bytes, const weft_type_t *child,
                      weft_type_t **out);

/* count blocks: block i is blocklengths[i] children starting at
 * displacements[i] child extents (MPI_Type_indexed). */
int weft_type_indexed(size_t count, const uint64_t *blocklengths,
                      const int64_t *displacements, const weft_type_t *child,
                      weft_type_t **out);

/* As weft_type_indexed with displacements in bytes
 * (MPI_Type_create_hindexed). */
int weft_type_hindexed(size_t count, const uint64_t *blocklengths,
                       const int64_t *displacements_bytes,
                       const weft_type_t *child, weft_type_t **out);

/* count blocks of blocklength children at displacements[i] child extents
 * (MPI_Type_create_indexed_block). */
int weft_type_indexed_block(size_t count, uint64_t blocklength,
                            const int64_t *displacements,
                            const weft_type_t *child, weft_type_t **out);

/* As weft_type_indexed_block with displacements in bytes
 * (MPI_Type_create_hindexed_block). */
int weft_type_hindexed_block(size_t count, uint64_t blocklength,
                             const int64_t *displacements_bytes,
                             const weft_type_t *child, weft_type_t **out);

/* count blocks: block i is blocklengths[i] instances of children[i] at
 * displacements_bytes[i] (MPI_Type_create_struct). */
int weft_type_struct(size_t count, const uint64_t *blocklengths,
                     const int64_t *displacements_bytes,
                     const weft_type_t *const *children, weft_type_t **out);

/* The data of child with lower bound lb and extent extent, in bytes
 * (MPI_Type_create_resized). */
int weft_type_resized(const weft_type_t *child, int64_t lb, int64_t extent,
                      weft_type_t **out);

/* The box of subsizes elements starting at starts inside an array of
 * sizes elements, ndims dimensions, order WEFT_ORDER_* (each array holds
 * ndims values; MPI_Type_create_subarray). The extent is the whole
 * array. */
int weft_type_subarray(uint32_t ndims, const uint64_t *sizes,
                       const uint64_t *subsizes, const uint64_t *starts,
                       int order, const weft_type_t *element,
                       weft_type_t **out);

/* The part of a gsizes array (ndims dimensions, order WEFT_ORDER_*) that
 * process rank of a psizes grid of size processes owns
 * (MPI_Type_create_darray). distributions[i] is WEFT_DISTRIBUTE_*;
 * dargs[i] is a block size in elements or WEFT_DARG_DEFAULT, and dargs
 * may be NULL for all defaults. The extent is the whole array. */
int weft_type_darray(uint32_t size, uint32_t rank, uint32_t ndims,
                     const uint64_t *gsizes, const int *distributions,
                     const int64_t *dargs, const uint64_t *psizes, int order,
                     const weft_type_t *element, weft_type_t **out);

/* Data bytes of one instance of type. */
int weft_type_size(const weft_type_t *type, uint64_t *size);

/* Lower bound and extent of one instance of type, in bytes. */
int weft_type_extent(const weft_type_t *type, int64_t *lb, int64_t *extent);

/* Frees a type. Types built from it are unaffected. */
int weft_type_free(weft_type_t *type);

/* ------------------------------------------------------------------ */
/* Noncontiguous I/O                                                   */
/* ------------------------------------------------------------------ */

/* A noncontiguous access moves a stream of bytes between pieces of a
 * memory buffer and regions of a file, both taken in order; the two sides
 * have the same total length but need not pair up piece by piece. Each
 * call returns that total or -errno: -EINVAL when a memory piece lies
 * outside [0, buffer_bytes), a file offset is negative, the totals
 * differ, or the file is open with O_APPEND (writes name their offsets);
 * -EFBIG past the file size limit. Reads return zeros past the end of
 * the file and leave buffer bytes outside the memory pieces unchanged:
 * the buffer of a read must be initialised (e.g. by calloc or memset).
 * Writes follow weft_pwrite's rules (complete or fail, -EIO after an
 * earlier failure, fsync after each with O_SYNC). */

/* How a file's noncontiguous calls go over the wire (for comparison):
 *   WEFT_IO_DEFAULT   datatype I/O for weft_*_dtype, list I/O for
 *                     weft_p*_list;
 *   WEFT_IO_DATATYPE  one request per server holding any of the bytes,
 *                     carrying the pattern; each server finds its pieces;
 *   WEFT_IO_LIST      region lists, at most regions_per_request regions
 *                     per request (0: 65536; 64 is the classic list I/O);
 *   WEFT_IO_POSIX     one blocking request per contiguous piece. */
#define WEFT_IO_DEFAULT 0
#define WEFT_IO_DATATYPE 1
#define WEFT_IO_LIST 2
#define WEFT_IO_POSIX 3

/* Sets the method of file's noncontiguous calls (file-wide, for every
 * thread). regions_per_request must be 0 except with WEFT_IO_LIST, where
 * it is at most 65536. -EINVAL for anything else. */
int weft_set_io_method(weft_file_t *file, int method,
                       uint32_t regions_per_request);

/* List I/O read: the file regions (file_offsets[i], file_lengths[i]),
 * i < file_count, into the buffer pieces (memory_offsets[j],
 * memory_lengths[j]), j < memory_count. Returns the total length. */
ssize_t weft_pread_list(weft_file_t *file, void *buffer, size_t buffer_bytes,
                        size_t memory_count, const uint64_t *memory_offsets,
                        const uint64_t *memory_lengths, size_t file_count,
                        const int64_t *file_offsets,
                        const uint64_t *file_lengths);

/* List I/O write: the buffer pieces to the file regions (as
 * weft_pread_list). Returns the total length. */
ssize_t weft_pwrite_list(weft_file_t *file, const void *buffer,
                         size_t buffer_bytes, size_t memory_count,
                         const uint64_t *memory_offsets,
                         const uint64_t *memory_lengths, size_t file_count,
                         const int64_t *file_offsets,
                         const uint64_t *file_lengths);

/* Datatype I/O read, as an MPI file view: file_type tiled from byte
 * displacement of the file is the view; the data of memory_count
 * instances of memory_type in buffer (instance i at i * its extent) is
 * filled from the view's data starting view_offset bytes into it.
 * Returns memory_count * size(memory_type). */
ssize_t weft_read_dtype(weft_file_t *file, void *buffer, size_t buffer_bytes,
                        const weft_type_t *memory_type, uint64_t memory_count,
                        int64_t displacement, uint64_t view_offset,
                        const weft_type_t *file_type);

/* Datatype I/O write: the data of memory_count instances of memory_type
 * in buffer to the view (as weft_read_dtype). Returns the bytes written. */
ssize_t weft_write_dtype(weft_file_t *file, const void *buffer,
                         size_t buffer_bytes, const weft_type_t *memory_type,
                         uint64_t memory_count, int64_t displacement,
                         uint64_t view_offset, const weft_type_t *file_type);

/* ------------------------------------------------------------------ */
/* Namespace                                                           */
/* ------------------------------------------------------------------ */

/* Attributes of path, following a final symlink. */
int weft_stat(weft_fs_t *fs, const char *path, struct weft_stat *out);

/* Attributes of path, not following a final symlink. */
int weft_lstat(weft_fs_t *fs, const char *path, struct weft_stat *out);

/* Sets the size of the file at path (needs write permission). */
int weft_truncate(weft_fs_t *fs, const char *path, int64_t size);

/* Removes a file or symlink (-EISDIR for a directory). */
int weft_unlink(weft_fs_t *fs, const char *path);

/* Creates a directory (-EEXIST if the name exists). */
int weft_mkdir(weft_fs_t *fs, const char *path, uint32_t mode);

/* Removes an empty directory (-ENOTEMPTY otherwise). */
int weft_rmdir(weft_fs_t *fs, const char *path);

/* Renames source to target, replacing a compatible existing target. */
int weft_rename(weft_fs_t *fs, const char *source, const char *target);

/* Creates a symlink at path whose content is target. A "weft:" prefix on
 * target is dropped (the stored target is the plain path). */
int weft_symlink(weft_fs_t *fs, const char *target, const char *path);

/* Copies the target of the symlink at path into buffer like snprintf: at
 * most capacity - 1 bytes, always NUL-terminated when capacity > 0.
 * Returns the full target length, so a result >= capacity means the
 * target was truncated. -EINVAL if path is not a symlink. */
ssize_t weft_readlink(weft_fs_t *fs, const char *path, char *buffer,
                      size_t capacity);

/* ------------------------------------------------------------------ */
/* Directories                                                         */
/* ------------------------------------------------------------------ */

/* Opens a stream over the entries of the directory at path ("." and ".."
 * are not listed). -ENOTDIR if path is not a directory. */
int weft_opendir(weft_fs_t *fs, const char *path, weft_dir_t **out);

/* Fills *entry with the next entry. Returns 1 if it did, 0 at the end,
 * -errno on failure. Entries are fetched a page at a time. */
int weft_readdir(weft_dir_t *dir, struct weft_dirent *entry);

/* Closes a directory stream. */
int weft_closedir(weft_dir_t *dir);

/* ------------------------------------------------------------------ */
/* Space                                                               */
/* ------------------------------------------------------------------ */

/* Space of the whole file system (one request per server). */
int weft_statfs(weft_fs_t *fs, struct weft_statfs *out);

/* Fills up to capacity entries of out with the space of each server, in
 * server id order; returns the number of servers (may exceed capacity;
 * pass out = NULL and capacity = 0 to size the array). */
ssize_t weft_statfs_servers(weft_fs_t *fs, struct weft_server_statfs *out,
                            size_t capacity);

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* A static description of an errno, given with either sign (so any
 * return value can be passed directly). Never NULL; never freed. */
const char *weft_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H */
