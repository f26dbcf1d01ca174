/* The C ABI of the Rust core (src/ffi.rs). Flavour-neutral: no MPI types.
 * Every function returns a Weft error class (0 = success); weft_mpiio.c
 * maps it to the MPI_ERR_* constant of the mpi.h it is compiled with. */
#ifndef WEFT_MPIIO_H
#define WEFT_MPIIO_H
#include <stddef.h>
#include <stdint.h>

enum weft_class {
    WEFT_SUCCESS = 0, WEFT_ERR_NO_SUCH_FILE = 1, WEFT_ERR_FILE_EXISTS = 2,
    WEFT_ERR_ACCESS = 3, WEFT_ERR_AMODE = 4, WEFT_ERR_IO = 5, WEFT_ERR_NO_SPACE = 6,
    WEFT_ERR_BAD_FILE = 7, WEFT_ERR_ARG = 8, WEFT_ERR_TYPE = 9,
    WEFT_ERR_UNSUPPORTED_OPERATION = 10, WEFT_ERR_INTERN = 11,
    WEFT_ERR_READ_ONLY = 12, WEFT_ERR_COUNT = 13
};

/* Access-mode bits (src/file.rs, mod amode). */
enum weft_amode {
    WEFT_MODE_CREATE = 1, WEFT_MODE_EXCL = 2, WEFT_MODE_RDONLY = 4,
    WEFT_MODE_WRONLY = 8, WEFT_MODE_RDWR = 16, WEFT_MODE_DELETE_ON_CLOSE = 32,
    WEFT_MODE_APPEND = 64, WEFT_MODE_UNIQUE_OPEN = 128, WEFT_MODE_SEQUENTIAL = 256
};

/* Datatype program opcodes (src/types.rs). */
enum weft_op {
    WEFT_OP_NAMED = 1, WEFT_OP_CONTIG = 2, WEFT_OP_VECTOR = 3, WEFT_OP_HVECTOR = 4,
    WEFT_OP_INDEXED = 5, WEFT_OP_HINDEXED = 6, WEFT_OP_INDEXED_BLOCK = 7,
    WEFT_OP_HINDEXED_BLOCK = 8, WEFT_OP_STRUCT = 9, WEFT_OP_RESIZED = 10,
    WEFT_OP_SUBARRAY = 11, WEFT_OP_DARRAY = 12
};

int weft_mpiio_lookup(const char *path, uint32_t amode, int64_t strip_bytes, int64_t stripe_count,
                      uint8_t *blob, size_t blob_cap, size_t *blob_len);
int weft_mpiio_attach(const char *path, const uint8_t *blob, size_t blob_len, uint32_t amode, uint64_t *id);
int weft_mpiio_detach(uint64_t id, int remove);
int weft_mpiio_unlink(const char *path);
int weft_mpiio_get_size(uint64_t id, int64_t *size);
int weft_mpiio_set_size(uint64_t id, int64_t size);
int weft_mpiio_sync(uint64_t id);
int weft_mpiio_type_build(const int64_t *words, size_t count, uint64_t *id);
int weft_mpiio_type_free(uint64_t id);
int weft_mpiio_set_view(uint64_t id, int64_t displacement, uint64_t etype_id, uint64_t file_type_id);
int weft_mpiio_set_window(uint64_t id, int64_t bytes);
int weft_mpiio_set_list_regions(uint64_t id, int64_t regions);
int weft_mpiio_io(uint64_t id, int write, int explicit_offset, int64_t offset, void *buffer,
                  int64_t count, uint64_t memory_type_id, int64_t *bytes);
int weft_mpiio_seek(uint64_t id, int64_t offset, int whence);
int weft_mpiio_get_position(uint64_t id, int64_t *offset);
int weft_mpiio_byte_offset(uint64_t id, int64_t offset, int64_t *displacement);
int weft_mpiio_flatten(uint64_t type_id, int64_t count, int64_t *pairs, size_t pairs_cap, size_t *pairs_len);
int weft_mpiio_panic_for_test(void);
/* Two-phase collective buffering (src/collective.rs; driven by c/collective.c). */
int weft_mpiio_coll_range(uint64_t id, int write, int explicit_offset, int64_t offset, int64_t count,
                          uint64_t memory_type_id, int64_t *start, int64_t *end, int64_t *bytes);
int weft_mpiio_coll_begin(uint64_t id, int write, int explicit_offset, int64_t offset, void *buffer, int64_t count,
                          uint64_t memory_type_id, int64_t lo, int64_t hi, uint64_t *plan);
int weft_mpiio_coll_round(uint64_t plan, int64_t destinations, const int64_t *windows, int64_t *counts,
                          const int64_t **pairs, const uint8_t **data);
int weft_mpiio_coll_deliver(uint64_t plan, const uint8_t *data, int64_t len);
int weft_mpiio_coll_end(uint64_t plan, int ok, int64_t *bytes);
int weft_mpiio_coll_write_window(uint64_t id, int64_t lo, int64_t hi, int64_t regions, const int64_t *pairs,
                                 const uint8_t *data, int64_t len);
int weft_mpiio_coll_read_window(uint64_t id, int64_t lo, int64_t hi, int64_t regions, const int64_t *pairs,
                                uint8_t *data, int64_t len);
int weft_mpiio_coll_strip(uint64_t id, int64_t *strip_bytes);
int weft_mpiio_data_requests(int64_t *requests, int64_t *bytes);
/* Plain paths on a Weft mount (src/mounts.rs): resolve returns 1 with the
 * Weft path, 0 if `name` is not on a Weft mount this process serves. */
int weft_mpiio_mount_enabled(void);
int weft_mpiio_mount_resolve(const char *name, char *weft_path, size_t cap);
void weft_mpiio_mount_remember(uint64_t id, const char *name);
void weft_mpiio_mount_refresh(uint64_t id, int forget);
/* rfs: and discard: names, ABT (src/remote.rs; driven by c/remote.c). */
int weft_mpiio_remote_is_name(const char *name);
int weft_mpiio_remote_hint(uint64_t id, const char *key, const char *value);
int weft_mpiio_remote_ready(uint64_t id);
int weft_mpiio_remote_finalize(void);
int weft_mpiio_remote_drain(uint64_t id, int *remote);
int weft_mpiio_abt_stats(int64_t *out);
#endif
