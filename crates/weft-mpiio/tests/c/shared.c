/* Shared file pointers on a Weft file (run by tests/mpi_shared.rs).
 *
 * usage: shared PREFIX   (e.g. weft:/shared)
 * Writes PREFIX.ordered (write_ordered, then write_ordered_begin/end) and
 * PREFIX.records (write_shared and iwrite_shared of many small records from every rank),
 * which the Rust side checks byte by byte; checks here: read_ordered and
 * read_shared return the right data, seek_shared / get_position_shared in
 * etypes of a strided view, set_view resets the shared pointer.
 * Prints "shared OK" on rank 0 when every check passed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 150

static int rank, size;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            MPI_Abort(MPI_COMM_WORLD, 1);                                  \
        }                                                                  \
    } while (0)

#define MPI_OK(call)                                                       \
    do {                                                                   \
        int rc_ = (call);                                                  \
        if (rc_ != MPI_SUCCESS) {                                          \
            char text_[MPI_MAX_ERROR_STRING];                              \
            int len_ = 0;                                                  \
            MPI_Error_string(rc_, text_, &len_);                           \
            CHECK(0, "%s: %s", #call, text_);                              \
        }                                                                  \
    } while (0)

typedef struct { int magic, rank, seq, check; } record;

static record make_record(int r, int seq) {
    record rec = {0x57454654, r, seq, r * 7919 + seq * 31 + 5};
    return rec;
}

static int valid(const record *rec) {
    return rec->magic == 0x57454654 && rec->rank >= 0 && rec->rank < size && rec->seq >= 0 && rec->seq < RECORDS &&
           rec->check == rec->rank * 7919 + rec->seq * 31 + 5;
}

static MPI_File open_file(const char *prefix, const char *suffix, int amode) {
    char path[512];
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    return fh;
}

/* Rank r writes r + 1 ints (r * 1000 + i) in two ordered rounds. */
static void ordered(const char *prefix) {
    MPI_File fh = open_file(prefix, "ordered", MPI_MODE_CREATE | MPI_MODE_RDWR);
    int mine = rank + 1, total = size * (size + 1) / 2;
    int out[64], in[64];
    for (int i = 0; i < mine; i++) out[i] = rank * 1000 + i;
    MPI_Status status;
    int count = -1;
    MPI_OK(MPI_File_write_ordered(fh, out, mine, MPI_INT, &status));
    MPI_Get_count(&status, MPI_INT, &count);
    CHECK(count == mine, "write_ordered count %d", count);
    MPI_Offset position = -1;
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == (MPI_Offset)total * sizeof(int), "shared position after write_ordered %lld", (long long)position);
    /* Second round through the split collective, 100 + the same values. */
    for (int i = 0; i < mine; i++) out[i] += 100;
    MPI_OK(MPI_File_write_ordered_begin(fh, out, mine, MPI_INT));
    count = -1;
    MPI_OK(MPI_File_write_ordered_end(fh, out, &status));
    MPI_Get_count(&status, MPI_INT, &count);
    CHECK(count == mine, "write_ordered_end count %d", count);
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == 2 * (MPI_Offset)total * sizeof(int), "shared position after the split round %lld", (long long)position);
    /* An end without a begin is an error, and the handle keeps working. */
    CHECK(MPI_File_write_ordered_end(fh, out, &status) != MPI_SUCCESS, "end without begin succeeded");

    /* Read both rounds back in rank order. */
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    memset(in, 0, sizeof in);
    MPI_OK(MPI_File_read_ordered(fh, in, mine, MPI_INT, &status));
    MPI_Get_count(&status, MPI_INT, &count);
    CHECK(count == mine, "read_ordered count %d", count);
    for (int i = 0; i < mine; i++) CHECK(in[i] == rank * 1000 + i, "read_ordered [%d] = %d", i, in[i]);
    memset(in, 0, sizeof in);
    MPI_OK(MPI_File_read_ordered_begin(fh, in, mine, MPI_INT));
    MPI_OK(MPI_File_read_ordered_end(fh, in, &status));
    MPI_Get_count(&status, MPI_INT, &count);
    CHECK(count == mine, "read_ordered_end count %d", count);
    for (int i = 0; i < mine; i++) CHECK(in[i] == rank * 1000 + i + 100, "read_ordered_end [%d] = %d", i, in[i]);
    MPI_OK(MPI_File_close(&fh));
}

/* Every rank appends RECORDS records with write_shared; then every rank
 * reads records with read_shared until end of file: each record is read by
 * exactly one rank. */
static void records(const char *prefix) {
    MPI_File fh = open_file(prefix, "records", MPI_MODE_CREATE | MPI_MODE_RDWR);
    MPI_Datatype rec_type;
    MPI_Type_contiguous(sizeof(record), MPI_BYTE, &rec_type);
    MPI_Type_commit(&rec_type);
    /* etype = one record: the shared pointer counts records. */
    MPI_OK(MPI_File_set_view(fh, 0, rec_type, rec_type, "native", MPI_INFO_NULL));
    for (int seq = 0; seq < RECORDS; seq++) {
        record rec = make_record(rank, seq);
        MPI_Status status;
        int count = -1;
        if (seq % 2) {
            /* Every other record through the nonblocking form. */
            MPI_Request request;
            MPI_OK(MPI_File_iwrite_shared(fh, &rec, 1, rec_type, &request));
            MPI_OK(MPI_Wait(&request, &status));
        } else {
            MPI_OK(MPI_File_write_shared(fh, &rec, 1, rec_type, &status));
        }
        MPI_Get_count(&status, rec_type, &count);
        CHECK(count == 1, "write_shared count %d", count);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset position = -1;
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == (MPI_Offset)size * RECORDS, "shared position %lld (records)", (long long)position);
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    long long mine = 0, sum = 0;
    /* Bounded: at most every record, plus the read that finds end of file. */
    for (int k = 0; k <= size * RECORDS; k++) {
        record rec;
        MPI_Status status;
        int count = -1;
        if (k % 2) {
            MPI_Request request;
            MPI_OK(MPI_File_iread_shared(fh, &rec, 1, rec_type, &request));
            MPI_OK(MPI_Wait(&request, &status));
        } else {
            MPI_OK(MPI_File_read_shared(fh, &rec, 1, rec_type, &status));
        }
        MPI_Get_count(&status, MPI_BYTE, &count);
        if (count == 0) break;
        CHECK(count == (int)sizeof rec, "read_shared got %d bytes", count);
        CHECK(valid(&rec), "read_shared got a bad record");
        mine++;
        sum += (long long)rec.rank * RECORDS + rec.seq;
    }
    long long all = 0, all_sum = 0, n = (long long)size * RECORDS;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&sum, &all_sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all == n, "read_shared read %lld records in all", all);
    CHECK(all_sum == n * (n - 1) / 2, "read_shared records sum %lld", all_sum);
    MPI_OK(MPI_File_close(&fh));
    MPI_Type_free(&rec_type);
}

/* seek_shared / get_position_shared in etypes of a strided view. */
static void positions(const char *prefix) {
    MPI_File fh = open_file(prefix, "positions", MPI_MODE_CREATE | MPI_MODE_RDWR);
    MPI_Datatype vector;
    MPI_Type_vector(4, 2, 5, MPI_INT, &vector); /* 2 ints of every 5 */
    MPI_Type_commit(&vector);
    MPI_OK(MPI_File_set_view(fh, 64, MPI_INT, vector, "native", MPI_INFO_NULL));
    MPI_Offset position = -1;
    MPI_OK(MPI_File_seek_shared(fh, 10, MPI_SEEK_SET));
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == 10, "after seek_shared(10) %lld", (long long)position);
    MPI_Barrier(MPI_COMM_WORLD); /* everyone has looked before rank 0 moves it */
    int values[4] = {11, 22, 33, 44}, back[4] = {0};
    if (rank == 0) MPI_OK(MPI_File_write_shared(fh, values, 4, MPI_INT, MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == 14, "after writing 4 etypes %lld", (long long)position);
    MPI_OK(MPI_File_seek_shared(fh, -4, MPI_SEEK_CUR));
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == 10, "after seek_shared(-4, CUR) %lld", (long long)position);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) {
        MPI_OK(MPI_File_read_shared(fh, back, 4, MPI_INT, MPI_STATUS_IGNORE));
        for (int i = 0; i < 4; i++) CHECK(back[i] == values[i], "read_shared [%d] = %d", i, back[i]);
        /* The same etypes through an explicit offset. */
        memset(back, 0, sizeof back);
        MPI_OK(MPI_File_read_at(fh, 10, back, 4, MPI_INT, MPI_STATUS_IGNORE));
        for (int i = 0; i < 4; i++) CHECK(back[i] == values[i], "read_at [%d] = %d", i, back[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* End of file in etypes: the same as the individual pointer's. */
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_END));
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    MPI_Offset individual = -1;
    MPI_OK(MPI_File_seek(fh, 0, MPI_SEEK_END));
    MPI_OK(MPI_File_get_position(fh, &individual));
    CHECK(position == individual && position == 14, "seek_shared END %lld, seek END %lld", (long long)position,
          (long long)individual);
    /* A negative target is refused on every rank; the pointer stays. */
    CHECK(MPI_File_seek_shared(fh, -100, MPI_SEEK_CUR) != MPI_SUCCESS, "seek_shared to a negative offset succeeded");
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == 14, "after the refused seek %lld", (long long)position);
    /* set_view resets the shared pointer. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_get_position_shared(fh, &position));
    CHECK(position == 0, "after set_view %lld", (long long)position);
    /* A count that is not whole etypes is refused. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    char odd[3] = {0};
    CHECK(MPI_File_write_shared(fh, odd, 3, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS, "3 bytes in int etypes accepted");
    MPI_OK(MPI_File_close(&fh));
    MPI_Type_free(&vector);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 2, "usage: shared PREFIX");
    CHECK(size <= 64, "too many ranks");
    ordered(argv[1]);
    records(argv[1]);
    positions(argv[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("shared OK\n");
    MPI_Finalize();
    return 0;
}
