/* Shared checks of the MPI test programs in this directory (included once
 * by each program: one translation unit per program).
 *
 * - rank, nprocs, failures: the program's rank, job size and count of
 *   failed checks (set rank and nprocs after MPI_Init);
 * - CHECK(cond, fmt, ...): counts a failure, with rank and line, and goes on;
 * - class_of(rc), expect_class(rc, class, what): an MPI error's class, and
 *   a counted failure (with both classes' texts) unless it is `class`;
 * - finish(name): sums the failures over the job, prints "NAME OK" on
 *   rank 0 when there are none, finalizes, and gives main's exit code. */
#ifndef WEFT_TEST_CHECK_H
#define WEFT_TEST_CHECK_H

#include <mpi.h>
#include <stdio.h>

static int rank __attribute__((unused)), nprocs __attribute__((unused)), failures __attribute__((unused));

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            failures++;                                                             \
        }                                                                           \
    } while (0)

static inline int class_of(int rc) {
    int class = -1;
    MPI_Error_class(rc, &class);
    return class;
}

static inline void expect_class(int rc, int expected, const char *what) {
    int class = class_of(rc);
    if (class != expected) {
        char got[MPI_MAX_ERROR_STRING], want[MPI_MAX_ERROR_STRING];
        int l;
        MPI_Error_string(class, got, &l);
        MPI_Error_string(expected, want, &l);
        fprintf(stderr, "rank %d: %s: got class %d (%s), expected %d (%s)\n", rank, what, class, got, expected, want);
        failures++;
    }
}

static inline int finish(const char *name) {
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf("%s OK\n", name);
    MPI_Finalize();
    return total ? 1 : 0;
}

#endif
