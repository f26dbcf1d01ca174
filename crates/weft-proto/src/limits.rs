//! Every bound on sizes and counts that crosses a process boundary.
//!
//! Decoders enforce these before allocating, so a hostile peer can cost a
//! server at most these amounts. Relations between them are checked at
//! compile time at the bottom of this file.

/// Protocol version spoken by this build; the hello exchange rejects others.
pub const PROTOCOL_VERSION: u16 = 1;

/// Magic number opening every frame ("WEFT" little-endian).
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"WEFT");

/// Size of the fixed frame header in bytes.
pub const FRAME_HEADER_BYTES: usize = 32;

/// Largest encoded message header (request or reply body). Large enough for a
/// readdir page with attributes or a datatype description; small enough that
/// a hostile peer cannot make the server allocate much.
pub const HEADER_BYTES_MAX: u32 = 4 << 20;

/// Largest bulk chunk carried by one frame. Bulk transfers are split into
/// chunks of at most this size so a large transfer never monopolises a socket.
pub const CHUNK_BYTES_MAX: u32 = 1 << 20;

/// Largest payload of any frame.
pub const FRAME_PAYLOAD_BYTES_MAX: u32 = CHUNK_BYTES_MAX;

/// Chunks a writer may send for one request before it must wait for credit.
/// Bounds the memory one write request can pin on the receiver.
pub const WRITE_WINDOW_CHUNKS: u32 = 4;

/// Requests one connection may have in flight. The client enforces it; the
/// server rejects excess requests with `Busy` instead of blocking its reader.
pub const REQUESTS_INFLIGHT_MAX: u32 = 64;

/// Upper bound of buffered bulk memory per connection on a server
/// (every in-flight request holding a full write window).
pub const CONNECTION_MEMORY_BYTES_MAX: u64 =
    REQUESTS_INFLIGHT_MAX as u64 * WRITE_WINDOW_CHUNKS as u64 * CHUNK_BYTES_MAX as u64;

/// Connections one server accepts at once.
pub const CONNECTIONS_MAX: u32 = 4096;

/// Requests in flight on one peer (server-to-server) connection: admitted
/// apart from client requests so clients cannot starve a tree operation.
pub const PEER_REQUESTS_INFLIGHT_MAX: u32 = 256;

/// Largest fan-out of a tree collective.
pub const TREE_FANOUT_MAX: u32 = 64;

/// Most handles one `ReserveDatafiles` grants or `ListReserved` returns.
pub const RESERVE_HANDLES_MAX: u32 = 65_536;

/// Longest single path component, as on Linux.
pub const NAME_BYTES_MAX: usize = 255;

/// Longest path, as on Linux.
pub const PATH_BYTES_MAX: usize = 4096;

/// Longest symlink target.
pub const SYMLINK_BYTES_MAX: usize = 4095;

/// Symlinks followed during one path resolution before ELOOP (Linux uses 40).
pub const SYMLINK_FOLLOW_MAX: u32 = 40;

/// Most entries one readdir page may return.
pub const READDIR_ENTRIES_MAX: u32 = 4096;

/// Most handles in one batched request (getattr batch, sizes).
pub const BATCH_HANDLES_MAX: u32 = 4096;

/// Most datafiles (stripe width) of one file.
pub const STRIPE_COUNT_MAX: u32 = 1024;

/// Smallest and largest strip size.
pub const STRIP_BYTES_MIN: u64 = 1;
/// Largest strip size.
pub const STRIP_BYTES_MAX: u64 = 1 << 32;

/// Largest single read or write request (one datafile, contiguous).
pub const IO_BYTES_MAX: u64 = 1 << 40;

/// Largest file offset + length accepted (the POSIX off_t range).
pub const FILE_BYTES_MAX: u64 = i64::MAX as u64;

/// Most regions in one list I/O request. A list is sent in requests of at
/// most this many regions (the client's default chunk); 20 bytes per encoded
/// region at worst keeps the request body far below `HEADER_BYTES_MAX`.
pub const LIST_REGIONS_MAX: u32 = 65_536;

/// Longest datatype program (64-bit words) libweft_mpiio's C layer hands its
/// Rust core for one MPI datatype (`weft-mpiio/src/types.rs`). Types are not
/// flattened, so this grows with the constructors' arguments (an hindexed or
/// struct block costs 2 words, plus its child's program for a struct), not
/// with the data: 2^24 words (128 MiB of program) admit struct types of
/// millions of blocks (3.3 million of a named type, 5 words each), and
/// refuse only a program that is itself the memory problem. The dataloop's own limits (`weft_dataloop::limits`) and, for
/// datatype requests, [`HEADER_BYTES_MAX`] apply after it.
pub const MPI_DATATYPE_PROGRAM_WORDS_MAX: u64 = 1 << 24;

/// Default of `[durability] metadata_reserve_bytes`: the space a server
/// keeps allocated for its write-ahead log (half) and as headroom behind its
/// key/value store (half), so namespace changes that free space still commit
/// on a full disk. 64 MiB of log is what a busy server appends between
/// checkpoints; the same again lets the store grow by a few hundred thousand
/// records' worth of removals and renames with no free block on the disk.
pub const METADATA_RESERVE_BYTES_DEFAULT: u64 = 128 << 20;
/// Smallest reserve: 2 MiB of log still holds many batches between checkpoints.
pub const METADATA_RESERVE_BYTES_MIN: u64 = 4 << 20;
/// Largest reserve (the log's record offsets are u64, but a bigger log only
/// lengthens replay).
pub const METADATA_RESERVE_BYTES_MAX: u64 = 1 << 36;

const _: () = assert!(METADATA_RESERVE_BYTES_MIN <= METADATA_RESERVE_BYTES_DEFAULT);
const _: () = assert!(METADATA_RESERVE_BYTES_DEFAULT <= METADATA_RESERVE_BYTES_MAX);
const _: () = assert!(LIST_REGIONS_MAX as u64 * 20 + 1024 <= HEADER_BYTES_MAX as u64);
const _: () = assert!(FRAME_PAYLOAD_BYTES_MAX >= CHUNK_BYTES_MAX);
const _: () = assert!(HEADER_BYTES_MAX as usize >= READDIR_ENTRIES_MAX as usize * (NAME_BYTES_MAX + 64));
const _: () = assert!(WRITE_WINDOW_CHUNKS >= 1);
const _: () = assert!(CONNECTION_MEMORY_BYTES_MAX <= 1 << 30);
