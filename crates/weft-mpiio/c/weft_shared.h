/* The C ABI of src/shared.rs: shared file pointers and atomic mode.
 * Same conventions as weft_mpiio.h (Weft error classes, 0 = success). */
#ifndef WEFT_SHARED_H
#define WEFT_SHARED_H
#include <stdint.h>

int weft_mpiio_shared_open(uint64_t id, uint64_t *session, uint64_t *lease_ms);
int weft_mpiio_shared_attach(uint64_t id, uint64_t session, uint64_t lease_ms);
int weft_mpiio_shared_close(uint64_t id, int owner);
int weft_mpiio_shared_etypes(uint64_t id, int64_t count, uint64_t memory_type_id, int64_t *etypes);
int weft_mpiio_shared_fetch_add(uint64_t id, int64_t delta, int64_t *old);
int weft_mpiio_shared_set(uint64_t id, int64_t value);
int weft_mpiio_shared_get(uint64_t id, int64_t *value);
int weft_mpiio_shared_seek(uint64_t id, int64_t offset, int whence);
int weft_mpiio_set_atomic(uint64_t id, int atomic);
int weft_mpiio_get_atomic(uint64_t id, int *atomic);
/* src/atomic_locks.rs: hints weft_atomic_method / weft_lock_method / weft_lock_protocol (-1: unchanged). */
int weft_mpiio_set_lock_hints(uint64_t id, int atomic, int method, int protocol);
#endif
