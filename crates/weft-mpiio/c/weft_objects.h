/* The object cache and atomic mode by objects (src/object_cache.rs;
 * c/objects.c drives the collective parts). */
#ifndef WEFT_OBJECTS_H
#define WEFT_OBJECTS_H
#include <stddef.h>
#include <stdint.h>
int weft_mpiio_set_cache_hints(uint64_t id, int cache, int64_t budget);
int weft_mpiio_objects_wanted(uint64_t id);
int weft_mpiio_cache_wanted(uint64_t id);
int weft_mpiio_cache_active(uint64_t id);
int weft_mpiio_cache_flush(uint64_t id);
int weft_mpiio_objects_describe(uint64_t id, uint8_t *buf, size_t cap, size_t *len);
int weft_mpiio_objects_forget(uint64_t id);
int weft_mpiio_objects_install(uint64_t id, int rank, int nprocs, const uint8_t *data, const int64_t *lens,
                               int cache);
int weft_mpiio_cache_summary(uint64_t id, int64_t *objects, int *coarse, int64_t *flushes);
#endif
