/* Tile reader (MPI-Tile-IO, Ching ch.4): a display wall of TX x TY tiles
 * of W x H pixels of B bytes, neighbouring tiles overlapping by OX / OY
 * pixels, one process per tile, reading frames from one file; and the
 * writer side, which writes the same frames densely (the frame cut into
 * TX x TY disjoint blocks, one per process).
 *
 *   tile_io --path PATH [options]        (needs TX*TY processes)
 *
 * The frame is (TX*W - (TX-1)*OX) x (TY*H - (TY-1)*OY) pixels, row-major;
 * frames follow each other in the file. Rank r shows tile (r % TX, r / TX),
 * whose top-left pixel is (x*(W-OX), y*(H-OY)); its file view is a
 * subarray of the frame (H rows of W*B bytes: H regions per frame), and
 * each frame is one call of W*H*B contiguous bytes in memory. Thesis size
 * (the defaults): 3x2 tiles of 1024x768 24-bit pixels, overlap 270/128, a
 * 2532x1408 frame (10.2 MiB), 768 regions of 3 KiB per process per frame.
 *
 * Per method (apps.h): the writer writes all frames (timed), the file is
 * checked byte for byte (untimed), the reader reads all frames (timed)
 * and every byte read is checked (untimed). Each method writes a
 * different pattern, so no method can pass on another's data.
 *
 * Options: --methods LIST (default all of apps.h, list-64 included)  --frames N (10)
 *   --tiles TXxTY (3x2)  --tile WxH (1024x768)  --overlap OXxOY (270x128)
 *   --pixel-bytes B (3)  --sync (MPI_File_sync inside the timed write)
 *   --keep (leave the file, as the last method wrote it, for comparison)
 *   --atomic (MPI_File_set_atomicity(1) after open: atomic-mode writes and reads)
 * One JSON object per (method, phase) on stdout. */
#include "apps.h"

#include <getopt.h>

typedef struct {
    long long tx, ty, w, h, ox, oy, b, frames;
    long long frame_w, frame_h, frame_bytes;
    int sync; /* MPI_File_sync inside the timed write */
    int atomic; /* MPI_File_set_atomicity(1) after open */
} wall_t;

/* A rectangle of the frame, in pixels. */
typedef struct {
    long long x, y, w, h;
} rect_t;

static rect_t reader_tile(const wall_t *g, int rank) {
    rect_t r = {(rank % g->tx) * (g->w - g->ox), (rank / g->tx) * (g->h - g->oy), g->w, g->h};
    return r;
}

/* The dense writer's block: the frame cut into tx x ty disjoint blocks. */
static rect_t writer_block(const wall_t *g, int rank) {
    long long cx = rank % g->tx, cy = rank / g->tx;
    long long x0 = cx * g->frame_w / g->tx, x1 = (cx + 1) * g->frame_w / g->tx;
    long long y0 = cy * g->frame_h / g->ty, y1 = (cy + 1) * g->frame_h / g->ty;
    rect_t r = {x0, y0, x1 - x0, y1 - y0};
    return r;
}

static MPI_Datatype rect_type(const wall_t *g, rect_t r) {
    int sizes[2] = {(int)g->frame_h, (int)(g->frame_w * g->b)};
    int subsizes[2] = {(int)r.h, (int)(r.w * g->b)};
    int starts[2] = {(int)r.y, (int)(r.x * g->b)};
    MPI_Datatype t;
    MPI_CHECK(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_BYTE, &t));
    MPI_CHECK(MPI_Type_commit(&t));
    return t;
}

/* File offset of row `row` of rectangle r in frame f. */
static long long rect_row_offset(const wall_t *g, rect_t r, long long f, long long row) {
    return f * g->frame_bytes + ((r.y + row) * g->frame_w + r.x) * g->b;
}

static long long rect_bytes(const wall_t *g, rect_t r) { return r.w * r.h * g->b; }

/* Fills (pattern) or checks all frames of rectangle r in buf. */
static long long rect_pattern(const wall_t *g, rect_t r, unsigned char *buf, uint64_t file_id, int check) {
    long long bad = 0, row_bytes = r.w * g->b;
    for (long long f = 0; f < g->frames; f++)
        for (long long row = 0; row < r.h; row++) {
            unsigned char *p = buf + (f * r.h + row) * row_bytes;
            uint64_t off = (uint64_t)rect_row_offset(g, r, f, row);
            if (check) bad += pattern_check(p, file_id, off, (size_t)row_bytes, "tile read");
            else pattern_fill(p, file_id, off, (size_t)row_bytes);
        }
    return bad;
}

/* One access per frame through the view of r (frame f at view offset
 * f * the rectangle's bytes; buf holds all frames). */
static access_t *frame_accesses(const wall_t *g, rect_t r, MPI_Datatype view, unsigned char *buf) {
    access_t *a = malloc(sizeof(access_t) * (size_t)g->frames);
    if (!a) die("out of memory");
    long long bytes = rect_bytes(g, r);
    for (long long f = 0; f < g->frames; f++)
        a[f] = (access_t){0, MPI_BYTE, view, f * bytes, buf + f * bytes, (int)bytes, MPI_BYTE};
    return a;
}

typedef struct {
    const wall_t *g;
    rect_t tile;
    unsigned char *rbuf;
} tile_read_t;

static long long check_tiles(const void *ctx, uint64_t file_id) {
    const tile_read_t *t = ctx;
    return rect_pattern(t->g, t->tile, t->rbuf, file_id, 1);
}

static void report(const char *path, const wall_t *g, const char *method, const char *phase, long long bytes,
                   double seconds, long long regions) {
    json_t j;
    app_json(&j, "tile_io", path, method, phase, bytes, seconds);
    json_int(&j, "frames", g->frames);
    json_int(&j, "tiles_x", g->tx);
    json_int(&j, "tiles_y", g->ty);
    json_int(&j, "tile_w", g->w);
    json_int(&j, "tile_h", g->h);
    json_int(&j, "overlap_x", g->ox);
    json_int(&j, "overlap_y", g->oy);
    json_int(&j, "frame_bytes", g->frame_bytes);
    json_int(&j, "regions_per_frame", regions);
    json_int(&j, "atomic", g->atomic);
    json_end(&j);
}

static void run_method(const char *path, const void *ctx_wall, const char *name, uint64_t file_id) {
    const wall_t *g = ctx_wall;
    method_t m = method_make(name);
    rect_t tile = reader_tile(g, g_rank), block = writer_block(g, g_rank);
    MPI_Datatype tile_type = rect_type(g, tile), block_type = rect_type(g, block);
    unsigned char *wbuf = malloc((size_t)(rect_bytes(g, block) * g->frames));
    unsigned char *rbuf = calloc((size_t)g->frames, (size_t)rect_bytes(g, tile));
    if (!wbuf || !rbuf) die("out of memory");
    rect_pattern(g, block, wbuf, file_id, 0);
    access_t *writes = frame_accesses(g, block, block_type, wbuf), *reads = frame_accesses(g, tile, tile_type, rbuf);
    tile_read_t ctx = {g, tile, rbuf};
    double seconds[2];
    app_run("tile_io", path, &m, file_id, g->sync, g->atomic, writes, (int)g->frames, reads, (int)g->frames,
            g->frames * g->frame_bytes, check_tiles, &ctx, seconds);
    report(path, g, name, "write", g->frames * g->frame_bytes, seconds[0], block.h);
    report(path, g, name, "read", sum_all(rect_bytes(g, tile)) * g->frames, seconds[1], tile.h);
    MPI_Type_free(&tile_type);
    MPI_Type_free(&block_type);
    free(writes), free(reads), free(wbuf), free(rbuf);
    method_free(&m);
}

static void parse_pair(const char *text, long long *a, long long *b) {
    if (sscanf(text, "%lldx%lld", a, b) != 2 || *a < 0 || *b < 0) die("expected AxB, got %s", text);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_procs);
    wall_t g = {3, 2, 1024, 768, 270, 128, 3, 10, 0, 0, 0, 0, 0};
    const char *path = NULL, *methods = APP_METHODS_ALL; /* with list-64 (apps.h) */
    int keep = 0;
    static struct option opts[] = {{"path", 1, 0, 'p'},    {"methods", 1, 0, 'm'}, {"frames", 1, 0, 'f'},
                                   {"tiles", 1, 0, 't'},   {"tile", 1, 0, 'w'},    {"overlap", 1, 0, 'o'},
                                   {"pixel-bytes", 1, 0, 'b'}, {"sync", 0, 0, 's'}, {"keep", 0, 0, 'k'},
                                   {"atomic", 0, 0, 'a'},  {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': path = optarg; break;
        case 'm': methods = optarg; break;
        case 'f': g.frames = atoll(optarg); break;
        case 't': parse_pair(optarg, &g.tx, &g.ty); break;
        case 'w': parse_pair(optarg, &g.w, &g.h); break;
        case 'o': parse_pair(optarg, &g.ox, &g.oy); break;
        case 'b': g.b = atoll(optarg); break;
        case 's': g.sync = 1; break;
        case 'k': keep = 1; break;
        case 'a': g.atomic = 1; break;
        default: die("unknown option");
        }
    }
    if (!path) die("--path is required");
    if (g.tx * g.ty != g_procs) die("%lldx%lld tiles need %lld processes, not %d", g.tx, g.ty, g.tx * g.ty, g_procs);
    if (g.ox >= g.w || g.oy >= g.h || g.frames < 1 || g.b < 1) die("bad geometry: overlap must be below the tile size");
    g.frame_w = g.tx * g.w - (g.tx - 1) * g.ox;
    g.frame_h = g.ty * g.h - (g.ty - 1) * g.oy;
    g.frame_bytes = g.frame_w * g.frame_h * g.b;
    if (g.w * g.h * g.b > 1 << 30 || g.frame_w * g.b > 1 << 30) die("tile too large for int counts");
    app_each_method(path, methods, 100, keep, run_method, &g);
    MPI_Finalize();
    return 0;
}
