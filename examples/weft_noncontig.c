/*
 * weft_noncontig.c - noncontiguous I/O through the libweft C API.
 *
 * Usage: weft_noncontig [CONFIG [BASE_DIR]]
 *   CONFIG    Weft configuration file (default: $WEFT_CONFIG)
 *   BASE_DIR  directory to create and work in (default: /weft-noncontig)
 *
 * The file holds a ROWS x COLS array of ELEMENT_BYTES-byte elements after
 * a DISPLACEMENT-byte header. A process owns the SUB_ROWS x SUB_COLS box
 * at (ROW0, COL0); in memory the box sits inside a one-element halo
 * (HALO_ROWS x HALO_COLS), so both sides of the access are strided. The
 * box is written four ways - datatype I/O (subarray memory and file
 * types), list I/O (one memory piece per row, two file regions per row),
 * list I/O with 3 regions per request, and posix-style - each into a file
 * prefilled with a background pattern. Each file is read back with a
 * contiguous weft_pread and compared byte for byte with the expected
 * image; the box is also read back with datatype and list reads into a
 * fresh halo buffer whose halo must stay untouched. A 2 x 2 darray
 * decomposition then writes a whole array from four "processes".
 *
 * Prints one line per step ("ok: ..." or "FAIL: ...") and exits 0 only if
 * every check passed. BASE_DIR/dtype.bin is left behind for the test to
 * check with another client: FILE_BYTES bytes, byte i =
 * pattern_byte(i, BACKGROUND_SEED) except the box, whose bytes come from
 * the halo buffer (byte j = pattern_byte(j, MEMORY_SEED)).
 *
 * Self-contained on purpose: the connection setup and the pattern checks
 * repeat those of weft_example.c, so that each example reads (and can be
 * copied) alone, with nothing but weft.h.
 *
 * Build (from the workspace root, after cargo build --release -p weft-capi):
 *   gcc -O2 -Wall -Werror -I include examples/weft_noncontig.c \
 *       -L target/release -lweft -Wl,-rpath,$PWD/target/release \
 *       -o target/release/weft_noncontig
 * or: make -C examples
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

/* Small strips over three datafiles, so one row crosses strips. */
#define STRIP_BYTES 512
#define STRIPE_COUNT 3

#define ELEMENT_BYTES 4
#define ROWS 64
#define COLS 48
#define ROW0 5
#define COL0 7
#define SUB_ROWS 40
#define SUB_COLS 20
#define HALO_ROWS (SUB_ROWS + 2)
#define HALO_COLS (SUB_COLS + 2)
#define DISPLACEMENT 100
#define ROW_BYTES (SUB_COLS * ELEMENT_BYTES)
#define BOX_BYTES (SUB_ROWS * ROW_BYTES)
#define HALO_BYTES (HALO_ROWS * HALO_COLS * ELEMENT_BYTES)
#define FILE_BYTES (DISPLACEMENT + ROWS * COLS * ELEMENT_BYTES)
/* Splits each file row into two regions, so list pieces do not pair up. */
#define FIRST_PART_BYTES 48

#define BACKGROUND_SEED 3
#define MEMORY_SEED 5
#define UNTOUCHED 0xEE

static int failures = 0;

/* The byte at position i of a pattern; the Rust test computes the same. */
static unsigned char pattern_byte(uint64_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + (i >> 8) + seed * 7u) & 0xffu);
}

static void fill_pattern(unsigned char *buffer, size_t length, unsigned seed)
{
    for (size_t i = 0; i < length; i++)
        buffer[i] = pattern_byte(i, seed);
}

/* Checks that a call returned `want`; prints one line either way. */
static int expect(long got, long want, const char *what)
{
    if (got == want) {
        printf("ok: %s\n", what);
        return 1;
    }
    printf("FAIL: %s: got %ld (%s), want %ld (%s)\n", what, got,
           got < 0 ? weft_strerror((int)got) : "-", want,
           want < 0 ? weft_strerror((int)want) : "-");
    failures++;
    return 0;
}

/* Checks a condition; prints one line either way. */
static int check(int condition, const char *what)
{
    if (condition) {
        printf("ok: %s\n", what);
        return 1;
    }
    printf("FAIL: %s\n", what);
    failures++;
    return 0;
}

static void join(char *out, size_t size, const char *dir, const char *name)
{
    int length = snprintf(out, size, "%s/%s", dir, name);

    if (length < 0 || (size_t)length >= size) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(2);
    }
}

/* Offsets of box row r in the halo buffer and in the file. */
static uint64_t memory_row(int r)
{
    return ((uint64_t)(r + 1) * HALO_COLS + 1) * ELEMENT_BYTES;
}

static int64_t file_row(int r)
{
    return DISPLACEMENT + ((int64_t)(ROW0 + r) * COLS + COL0) * ELEMENT_BYTES;
}

/* The file image after the box is written over the background. */
static void expected_image(unsigned char *image, const unsigned char *halo)
{
    fill_pattern(image, FILE_BYTES, BACKGROUND_SEED);
    for (int r = 0; r < SUB_ROWS; r++)
        memcpy(image + file_row(r), halo + memory_row(r), ROW_BYTES);
}

/* The datatypes of the box: in the halo buffer and in the file array. */
struct box_types {
    weft_type_t *element, *memory, *file;
};

static int make_types(struct box_types *types)
{
    const uint64_t halo_sizes[2] = {HALO_ROWS, HALO_COLS};
    const uint64_t file_sizes[2] = {ROWS, COLS};
    const uint64_t subsizes[2] = {SUB_ROWS, SUB_COLS};
    const uint64_t halo_starts[2] = {1, 1};
    const uint64_t file_starts[2] = {ROW0, COL0};
    uint64_t size = 0;
    int64_t lb = -1, extent = -1;

    memset(types, 0, sizeof *types);
    if (!expect(weft_type_bytes(ELEMENT_BYTES, &types->element), 0, "type: element"))
        return 0;
    if (!expect(weft_type_subarray(2, halo_sizes, subsizes, halo_starts,
                                   WEFT_ORDER_C, types->element, &types->memory),
                0, "type: memory subarray (C order)") ||
        !expect(weft_type_subarray(2, file_sizes, subsizes, file_starts,
                                   WEFT_ORDER_C, types->element, &types->file),
                0, "type: file subarray (C order)"))
        return 0;
    expect(weft_type_size(types->file, &size), 0, "type size");
    expect((long)size, BOX_BYTES, "file type size is the box");
    expect(weft_type_extent(types->file, &lb, &extent), 0, "type extent");
    check(lb == 0 && extent == ROWS * COLS * ELEMENT_BYTES,
          "file type extent is the whole array");
    return 1;
}

static void free_types(struct box_types *types)
{
    expect(weft_type_free(types->memory), 0, "free memory type");
    expect(weft_type_free(types->file), 0, "free file type");
    expect(weft_type_free(types->element), 0, "free element type");
    expect(weft_type_free(types->element), -EBADF, "second free gives -EBADF");
}

/* Creates `name` filled with the background pattern; returns it open. */
static weft_file_t *background_file(weft_fs_t *fs, const char *base,
                                    const char *name)
{
    char path[512];
    unsigned char *data = malloc(FILE_BYTES);
    weft_file_t *file = NULL;

    join(path, sizeof path, base, name);
    fill_pattern(data, FILE_BYTES, BACKGROUND_SEED);
    if (weft_create(fs, path, O_RDWR | O_EXCL, 0644, STRIP_BYTES, STRIPE_COUNT,
                    &file) != 0 ||
        weft_pwrite(file, data, FILE_BYTES, 0) != FILE_BYTES) {
        printf("FAIL: create %s\n", path);
        failures++;
    }
    free(data);
    return file;
}

/* Reads the whole file contiguously and compares it with `image`. */
static void check_image(weft_file_t *file, const unsigned char *image,
                        const char *what)
{
    unsigned char *back = malloc(FILE_BYTES + 16);
    char line[200];
    ssize_t n = weft_pread(file, back, FILE_BYTES + 16, 0);

    snprintf(line, sizeof line, "%s: contiguous read-back matches byte for byte",
             what);
    check(n == FILE_BYTES && memcmp(back, image, FILE_BYTES) == 0, line);
    free(back);
}

/* Checks a halo buffer read back: box equal to `halo`, halo untouched. */
static void check_halo(const unsigned char *back, const unsigned char *halo,
                       const char *what)
{
    unsigned char *want = malloc(HALO_BYTES);
    char line[200];

    memset(want, UNTOUCHED, HALO_BYTES);
    for (int r = 0; r < SUB_ROWS; r++)
        memcpy(want + memory_row(r), halo + memory_row(r), ROW_BYTES);
    snprintf(line, sizeof line, "%s: box matches and halo is untouched", what);
    check(memcmp(back, want, HALO_BYTES) == 0, line);
    free(want);
}

/* The list form of the box: one memory piece per row, two file regions
 * per row (FIRST_PART_BYTES, then the rest). */
struct box_lists {
    uint64_t memory_offsets[SUB_ROWS], memory_lengths[SUB_ROWS];
    int64_t file_offsets[2 * SUB_ROWS];
    uint64_t file_lengths[2 * SUB_ROWS];
};

static void make_lists(struct box_lists *lists)
{
    for (int r = 0; r < SUB_ROWS; r++) {
        lists->memory_offsets[r] = memory_row(r);
        lists->memory_lengths[r] = ROW_BYTES;
        lists->file_offsets[2 * r] = file_row(r);
        lists->file_lengths[2 * r] = FIRST_PART_BYTES;
        lists->file_offsets[2 * r + 1] = file_row(r) + FIRST_PART_BYTES;
        lists->file_lengths[2 * r + 1] = ROW_BYTES - FIRST_PART_BYTES;
    }
}

static ssize_t write_list(weft_file_t *file, const unsigned char *halo,
                          const struct box_lists *l)
{
    return weft_pwrite_list(file, halo, HALO_BYTES, SUB_ROWS, l->memory_offsets,
                            l->memory_lengths, 2 * SUB_ROWS, l->file_offsets,
                            l->file_lengths);
}

static ssize_t read_list(weft_file_t *file, unsigned char *halo,
                         const struct box_lists *l)
{
    return weft_pread_list(file, halo, HALO_BYTES, SUB_ROWS, l->memory_offsets,
                           l->memory_lengths, 2 * SUB_ROWS, l->file_offsets,
                           l->file_lengths);
}

static void step_dtype(weft_fs_t *fs, const char *base, const struct box_types *t,
                       const unsigned char *halo, const unsigned char *image)
{
    weft_file_t *file = background_file(fs, base, "dtype.bin");
    unsigned char *back = malloc(HALO_BYTES);

    if (file == NULL)
        return;
    expect((long)weft_write_dtype(file, halo, HALO_BYTES, t->memory, 1,
                                  DISPLACEMENT, 0, t->file),
           BOX_BYTES, "write_dtype of the box");
    check_image(file, image, "datatype I/O");
    memset(back, UNTOUCHED, HALO_BYTES);
    expect((long)weft_read_dtype(file, back, HALO_BYTES, t->memory, 1,
                                 DISPLACEMENT, 0, t->file),
           BOX_BYTES, "read_dtype of the box");
    check_halo(back, halo, "read_dtype");

    /* Half the box, from the middle of the view: rows 20.. of the box. */
    memset(back, UNTOUCHED, HALO_BYTES);
    expect((long)weft_read_dtype(file, back, HALO_BYTES, t->element,
                                 BOX_BYTES / 2 / ELEMENT_BYTES, DISPLACEMENT,
                                 BOX_BYTES / 2, t->file),
           BOX_BYTES / 2, "read_dtype at an offset into the view");
    check(memcmp(back, halo + memory_row(SUB_ROWS / 2), ROW_BYTES) == 0,
          "view offset selects the right row");
    /* The box's last byte is the buffer's byte memory_row(last) + row - 1. */
    expect((long)weft_read_dtype(file, back, memory_row(SUB_ROWS - 1) + ROW_BYTES - 1,
                                 t->memory, 1,
                                 DISPLACEMENT, 0, t->file),
           -EINVAL, "memory type past the buffer gives -EINVAL");
    expect(weft_close(file), 0, "close dtype.bin");
    free(back);
}

static void step_list(weft_fs_t *fs, const char *base, const unsigned char *halo,
                      const unsigned char *image)
{
    weft_file_t *file = background_file(fs, base, "list.bin");
    struct box_lists *lists = malloc(sizeof *lists);
    unsigned char *back = malloc(HALO_BYTES);

    if (file == NULL)
        return;
    make_lists(lists);
    expect((long)write_list(file, halo, lists), BOX_BYTES, "pwrite_list of the box");
    check_image(file, image, "list I/O");
    memset(back, UNTOUCHED, HALO_BYTES);
    expect((long)read_list(file, back, lists), BOX_BYTES, "pread_list of the box");
    check_halo(back, halo, "pread_list");

    expect(weft_set_io_method(file, WEFT_IO_LIST, 3), 0,
           "set_io_method list, 3 regions per request");
    memset(back, UNTOUCHED, HALO_BYTES);
    expect((long)read_list(file, back, lists), BOX_BYTES,
           "pread_list with 3 regions per request");
    check_halo(back, halo, "pread_list (3 per request)");

    lists->file_lengths[0] += 1;
    expect((long)read_list(file, back, lists), -EINVAL,
           "list totals that differ give -EINVAL");
    expect(weft_set_io_method(file, 42, 0), -EINVAL, "unknown method gives -EINVAL");
    expect(weft_close(file), 0, "close list.bin");
    free(lists);
    free(back);
}

/* The other methods produce the same file from the same calls. */
static void step_methods(weft_fs_t *fs, const char *base,
                         const struct box_types *t, const unsigned char *halo,
                         const unsigned char *image)
{
    weft_file_t *chunked = background_file(fs, base, "list3.bin");
    weft_file_t *posix = background_file(fs, base, "posix.bin");

    if (chunked == NULL || posix == NULL)
        return;
    expect(weft_set_io_method(chunked, WEFT_IO_LIST, 3), 0, "method list/3");
    expect((long)weft_write_dtype(chunked, halo, HALO_BYTES, t->memory, 1,
                                  DISPLACEMENT, 0, t->file),
           BOX_BYTES, "write_dtype as list I/O, 3 regions per request");
    check_image(chunked, image, "list I/O (3 per request)");
    expect(weft_set_io_method(posix, WEFT_IO_POSIX, 0), 0, "method posix");
    expect((long)weft_write_dtype(posix, halo, HALO_BYTES, t->memory, 1,
                                  DISPLACEMENT, 0, t->file),
           BOX_BYTES, "write_dtype as posix I/O");
    check_image(posix, image, "posix I/O");
    expect(weft_close(chunked), 0, "close list3.bin");
    expect(weft_close(posix), 0, "close posix.bin");
}

/* Four "processes" of a 2 x 2 grid (rows by block, columns cyclic by 5)
 * each write their part of a global array, memory and file both described
 * by their darray type, into a zeroed array; together they must rebuild
 * the global array and their sizes must add up to it. */
static void step_darray(weft_fs_t *fs, const char *base, weft_type_t *element)
{
    const uint64_t gsizes[2] = {ROWS, COLS}, psizes[2] = {2, 2};
    const int distributions[2] = {WEFT_DISTRIBUTE_BLOCK, WEFT_DISTRIBUTE_CYCLIC};
    const int64_t dargs[2] = {WEFT_DARG_DEFAULT, 5};
    const size_t array_bytes = ROWS * COLS * ELEMENT_BYTES;
    unsigned char *global = malloc(array_bytes), *back = calloc(1, array_bytes);
    weft_file_t *file = background_file(fs, base, "darray.bin");
    weft_type_t *mine = NULL;
    uint64_t total = 0, size = 0;
    int written = 1;

    if (file == NULL)
        return;
    fill_pattern(global, array_bytes, 9);
    (void)weft_pwrite(file, back, array_bytes, DISPLACEMENT);
    for (uint32_t rank = 0; rank < 4; rank++) {
        if (weft_type_darray(4, rank, 2, gsizes, distributions, dargs, psizes,
                             WEFT_ORDER_C, element, &mine) != 0 ||
            weft_type_size(mine, &size) != 0) {
            written = 0;
            continue;
        }
        total += size;
        written &= weft_write_dtype(file, global, array_bytes, mine, 1,
                                    DISPLACEMENT, 0, mine) == (ssize_t)size;
        weft_type_free(mine);
    }
    check(written, "darray: each rank writes its part with write_dtype");
    expect((long)total, (long)array_bytes, "darray: parts add up to the array");
    check(weft_pread(file, back, array_bytes, DISPLACEMENT) == (ssize_t)array_bytes &&
              memcmp(back, global, array_bytes) == 0,
          "darray: four ranks rebuild the array byte for byte");
    expect(weft_type_darray(4, 0, 2, gsizes, distributions, NULL, psizes,
                            WEFT_ORDER_FORTRAN, element, &mine),
           0, "darray with default dargs (NULL), Fortran order");
    weft_type_free(mine);
    expect(weft_type_darray(3, 0, 2, gsizes, distributions, NULL, psizes,
                            WEFT_ORDER_C, element, &mine),
           -EINVAL, "darray with a grid that is not size processes gives -EINVAL");
    check(mine == NULL, "failed constructor leaves *out NULL");
    expect(weft_close(file), 0, "close darray.bin");
    free(global);
    free(back);
}

static void run(weft_fs_t *fs, const char *base)
{
    struct box_types types;
    unsigned char *halo = malloc(HALO_BYTES);
    unsigned char *image = malloc(FILE_BYTES);

    fill_pattern(halo, HALO_BYTES, MEMORY_SEED);
    expected_image(image, halo);
    if (expect(weft_mkdir(fs, base, 0755), 0, "mkdir base") && make_types(&types)) {
        step_dtype(fs, base, &types, halo, image);
        step_list(fs, base, halo, image);
        step_methods(fs, base, &types, halo, image);
        step_darray(fs, base, types.element);
        free_types(&types);
    }
    free(halo);
    free(image);
}

int main(int argc, char **argv)
{
    const char *config = argc > 1 ? argv[1] : NULL; /* NULL: $WEFT_CONFIG */
    const char *base = argc > 2 ? argv[2] : "/weft-noncontig";
    weft_fs_t *fs = NULL;

    if (!expect(weft_connect(config, &fs), 0, "connect"))
        return 1;
    run(fs, base);
    expect(weft_disconnect(fs), 0, "disconnect");
    if (failures > 0) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
