/* The C ABI of src/nonblocking.rs (background accesses) and of the
 * independent I/O method hint. Flavour-neutral: no MPI types; functions
 * return a Weft error class (weft_mpiio.h). */
#ifndef WEFT_NONBLOCKING_H
#define WEFT_NONBLOCKING_H
#include <stdint.h>

/* Values of the weft_io_method hint (src/file.rs, set_io_method). */
enum weft_io_method { WEFT_IO_DATATYPE = 0, WEFT_IO_LIST = 1, WEFT_IO_POSIX = 2, WEFT_IO_SIEVE = 3 };

int weft_mpiio_istart(uint64_t id, int write, int explicit_offset, int64_t offset, void *buffer, int64_t count,
                      uint64_t memory_type_id, uint64_t *op);
int weft_mpiio_op_poll(uint64_t op, int block, int *finished, int64_t *bytes);
int weft_mpiio_op_free(uint64_t op);
int weft_mpiio_set_io_method(uint64_t id, int method);
#endif
