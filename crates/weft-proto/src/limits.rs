//! Every bound on sizes, counts and times that two Weft processes agree on.
//!
//! Decoders enforce these before allocating, so a hostile peer can cost a
//! server at most these amounts. Relations between them are checked at
//! compile time at the bottom of this file. Sections: frames and requests,
//! names and paths, striping and I/O, dataloops (enforced by
//! `weft-dataloop`'s builder and decoder), sessions and locks, timeouts.

/// Protocol version spoken by this build; the hello exchange rejects others.
pub const PROTOCOL_VERSION: u16 = 3;

/// Magic number opening every frame ("WEFT" little-endian).
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"WEFT");

/// Size of the fixed frame header in bytes.
pub const FRAME_HEADER_BYTES: usize = 32;

/// Largest encoded message header (request or reply body): the largest
/// dataloop plus the other fields of a datatype request, so every dataloop
/// the builder accepts can be sent (a readdir page with attributes is far
/// smaller); small enough that a hostile peer cannot make the server
/// allocate much.
pub const HEADER_BYTES_MAX: u32 = (DATALOOP_ENCODED_BYTES_MAX + DATATYPE_ACCESS_OTHER_BYTES_MAX) as u32;

/// Bytes a datatype request (`Request::ReadDatatype`/`WriteDatatype`) may
/// need besides its encoded dataloop: the request tag and the other fields
/// of `DatatypeAccess`, each at most a 10-byte varint (about 100 bytes in
/// all), with a wide margin.
pub const DATATYPE_ACCESS_OTHER_BYTES_MAX: u64 = 4096;

/// Largest bulk chunk carried by one frame. Bulk transfers are split into
/// chunks of at most this size so a large transfer never monopolises a socket.
pub const CHUNK_BYTES_MAX: u32 = 1 << 20;

/// Largest payload of any frame.
pub const FRAME_PAYLOAD_BYTES_MAX: u32 = CHUNK_BYTES_MAX;

/// Chunks a writer may send for one request before it must wait for credit.
/// Bounds the memory one write request can pin on the receiver.
pub const WRITE_WINDOW_CHUNKS: u32 = 4;

/// Frames of one request's reply a client connection holds before its
/// reader stops reading the socket (TCP then holds up the server): the
/// download window. A slow consumer of a large read thus costs at most
/// this many chunks, not the whole reply.
pub const DOWNLOAD_WINDOW_FRAMES: u32 = 4;

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

/// Parent pointers followed to tell whether a directory is inside another
/// (rename's loop check, [`crate::ancestry`]); a longer chain answers `Loop`.
/// More than the components of any path of [`PATH_BYTES_MAX`] bytes.
pub const PARENT_WALK_STEPS_MAX: u32 = 4096;

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

/// Most regions a server's walk of one datatype request (`ReadDatatype`,
/// `WriteDatatype`, a datatype lock) may take from the dataloop, counted as
/// the walk produces them before coalescing (a run skipped by arithmetic
/// is not counted). Bounds the CPU one request costs a server (a range of
/// tiny regions none of which it stores would otherwise cost one step per
/// region, up to `IO_BYTES_MAX`); past it the server answers `TooBig`. A
/// client splits a longer access into stream ranges of at most this many
/// regions.
pub const DATATYPE_WALK_REGIONS_MAX: u64 = 1 << 20;
const _: () = assert!(DATATYPE_WALK_REGIONS_MAX >= LIST_REGIONS_MAX as u64);

/// How long a capability (`Request::IssueCapability`) is valid after it
/// is issued, by the data servers' clocks (servers' clocks are assumed
/// within a few seconds of each other).
pub const CAPABILITY_LEASE_MS: u64 = 10 * 60 * 1000;
/// A client asks for a new capability when less than this is left of one.
pub const CAPABILITY_RENEW_MS: u64 = 60 * 1000;
const _: () = assert!(CAPABILITY_RENEW_MS * 4 <= CAPABILITY_LEASE_MS);

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
/// refuse only a program that is itself the memory problem. The dataloop's own
/// limits (`DATALOOP_*`, below) apply after it; every dataloop they admit
/// fits in a request header.
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

// ---------- dataloops ----------

/// Most nodes in one dataloop: child indices are `u32` on the wire, and a server
/// must not hold more per request than it can afford.
pub const DATALOOP_NODES_MAX: u32 = 65_536;

/// Deepest chain of nested nodes (a leaf has depth 1). Bounds the engine's
/// explicit stack; real MPI types rarely pass 10.
pub const DATALOOP_DEPTH_MAX: u32 = 64;

/// Most displacement (and per-block length/child) entries summed over all
/// indexed, block-indexed and struct nodes of one dataloop. Beyond this a
/// list of regions is the better description. Small enough that a dataloop
/// at this limit made of block-indexed nodes (8 bytes an entry) still
/// encodes within [`DATALOOP_ENCODED_BYTES_MAX`], so the two limits are
/// reached (and tested) apart.
pub const DATALOOP_DISPLACEMENTS_MAX: u64 = 1 << 18;

/// Largest encoded dataloop: the builder refuses types whose encoding would
/// be larger, so every buildable dataloop decodes, and it fits in one
/// request header with the rest of a datatype request. At 20 bytes per
/// struct entry (16 per indexed, 8 per block-indexed entry) this, not
/// [`DATALOOP_DISPLACEMENTS_MAX`], bounds a single struct (~209k entries).
pub const DATALOOP_ENCODED_BYTES_MAX: u64 = 4 << 20;

/// Bytes of the smallest possible encoded dataloop node (an empty struct:
/// tag, lb, extent, entry count); the decoder checks a declared node count
/// against it before allocating.
pub const DATALOOP_NODE_BYTES_MIN: u64 = 1 + 8 + 8 + 4;

// ---------- sessions and locks ----------
//
// A session is opened on a file at the server that stores the file's
// metafile. It holds one shared file pointer (a plain counter; the MPI-IO
// layer counts it in etypes of the view) and owns the byte-range locks
// taken through it. It lives while it is used within its lease: every
// request naming it renews the lease; a session not used for a whole
// lease expires and its locks are released. Sessions are kept in the
// server's memory only: after a server restart every old session id is
// unknown and answers `ErrorCode::Stale`.

/// Lease of a session (the server's when the client asks for 0, and
/// libweft_mpiio's unless `WEFT_SESSION_LEASE_MS` says otherwise): how long
/// the locks of a client that died stay held. Clients renew every third of
/// it, so a client stalled for less than 10 s keeps its session.
pub const LEASE_MS_DEFAULT: u32 = 15_000;
/// Shortest lease (shorter requests are raised to it): renewals every third
/// of it must stay well above a request's round trip.
pub const LEASE_MS_MIN: u32 = 100;
/// Longest lease (longer requests are lowered to it): bounds how long a dead
/// client's locks block the others.
pub const LEASE_MS_MAX: u32 = 600_000;
/// Longest a lock request waits on the server before it fails with
/// `TimedOut`: below the client's request timeout, so a waiting lock
/// is always answered before the client gives up on the connection.
pub const LOCK_WAIT_MS_MAX: u32 = 20_000;
/// Ranges in one lock request (the client coarsens longer lists to their span).
pub const LOCK_RANGES_MAX: usize = 65_536;
/// Sessions one server keeps at once (beyond: `Busy`).
pub const SESSIONS_MAX: usize = 65_536;
/// Granted locks per file (beyond: `Busy`).
pub const LOCKS_PER_FILE_MAX: usize = 4096;
/// Waiting lock requests per file (beyond: `Busy`).
pub const WAITERS_PER_FILE_MAX: usize = 1024;

// Byte-range locks at the data servers (`weft-server::locks`): each lock
// request is a list of pieces of one datafile; the server keeps every
// granted piece in an interval map per datafile. These bound that memory.

/// Pieces of one lock request kept exactly; a request with more is
/// escalated to one covering piece (its span on the datafile).
pub const LOCK_PIECES_PER_REQUEST_MAX: usize = 1 << 20;
/// Pieces kept per datafile (granted or not): beyond, new requests are escalated.
pub const LOCK_PIECES_PER_FILE_MAX: usize = 1 << 22;
/// Pieces kept per lock owner at one server: beyond, its new requests are escalated.
pub const LOCK_PIECES_PER_OWNER_MAX: usize = 1 << 21;
/// Lock requests one owner keeps at one server (beyond: `Busy`). Above
/// the 131,072 one-range requests of the POSIX lock benchmark on one server.
pub const LOCK_REQUESTS_PER_OWNER_MAX: usize = 1 << 18;
/// Lock owners one server keeps at once (beyond: `Busy`).
pub const LOCK_OWNERS_MAX: usize = 65_536;

// ---------- timeouts ----------

/// Default time a client waits to connect to a server and exchange hellos.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u32 = 5_000;
/// Default longest wait for any frame of a request in flight, after which the
/// client gives up on the connection (`TimedOut`).
pub const REQUEST_TIMEOUT_MS_DEFAULT: u32 = 30_000;

/// Default window of the MPI-IO library (`libweft_mpiio`), the
/// `cb_buffer_size` hint: bytes per aggregator per two-phase round, and the
/// most a bounce buffer holds. ROMIO's default. Data otherwise moves
/// straight between the user's memory and the wire, so a request's memory
/// beyond the user's buffer is bounded by this plus the transport's
/// chunks in flight. `c/collective.c` repeats it as `WEFT_CB_BUFFER_DEFAULT`.
pub const MPIIO_WINDOW_BYTES_DEFAULT: u64 = 16 << 20;
/// Smallest window the hint may set.
pub const MPIIO_WINDOW_BYTES_MIN: u64 = 1;
/// Largest window the hint may set (`c/collective.c`: `WEFT_CB_BUFFER_MAX`).
pub const MPIIO_WINDOW_BYTES_MAX: u64 = 1 << 30;

// ---------- admission and authentication ----------

/// Largest frame (header, body and payload) a server reads from a
/// connection before it is authenticated: the `Hello` and the
/// `Authenticate` (a MUNGE credential is a few hundred bytes), so an
/// unauthenticated peer costs the server at most this much memory.
pub const AUTH_FRAME_BYTES_MAX: u32 = 4096;
/// Time from accepting a connection to its authentication (`Hello` and
/// `Authenticate` both received), after which the server closes it.
pub const AUTH_TIMEOUT_MS: u32 = 5_000;

/// Most connections a server keeps that have not authenticated yet; one
/// more is closed at once. Each lives at most `AUTH_TIMEOUT_MS`, so a
/// flood of connections costs bounded memory and file descriptors, and
/// authenticated connections keep being served.
pub const UNAUTHENTICATED_CONNECTIONS_MAX: usize = 128;
/// Bytes of the server's nonce in the `Hello` reply.
pub const AUTH_NONCE_BYTES: usize = 32;
/// Fewest bytes a file-system key file may hold.
pub const AUTH_KEY_BYTES_MIN: usize = 32;

// ---------- remote MPI-IO (RFS gateway, weft-rfs) ----------

/// Most header bytes of one RFS frame (request or reply, without its data):
/// a file view's encoded type or a region list is the largest part.
pub const RFS_HEADER_BYTES_MAX: u32 = 8 << 20;
/// Most data bytes one RFS frame carries; clients split larger accesses.
pub const RFS_DATA_BYTES_MAX: u64 = 16 << 20;
/// Regions of one region-list access (collective windows split above this).
pub const RFS_REGIONS_MAX: usize = 65_536;
/// Time a client waits for one gateway reply before the access fails
/// (default; `WEFT_RFS_TIMEOUT_MS` overrides).
pub const RFS_REPLY_TIMEOUT_MS_DEFAULT: u32 = 120_000;
/// Time from accepting a gateway connection to its authentication.
pub const RFS_AUTH_TIMEOUT_MS: u32 = 5_000;

// ---------- relations ----------

const _: () = assert!(LIST_REGIONS_MAX as u64 * 20 + 1024 <= HEADER_BYTES_MAX as u64);
const _: () = assert!(FRAME_PAYLOAD_BYTES_MAX >= CHUNK_BYTES_MAX);
const _: () = assert!(HEADER_BYTES_MAX as usize >= READDIR_ENTRIES_MAX as usize * (NAME_BYTES_MAX + 64));
const _: () = assert!(WRITE_WINDOW_CHUNKS >= 1);
const _: () = assert!(DOWNLOAD_WINDOW_FRAMES >= 1);
const _: () = assert!(AUTH_FRAME_BYTES_MAX as usize >= FRAME_HEADER_BYTES + 1024);
const _: () = assert!(AUTH_TIMEOUT_MS <= CONNECT_TIMEOUT_MS_DEFAULT);
const _: () = assert!(CONNECTION_MEMORY_BYTES_MAX <= 1 << 30);
const _: () = assert!(DATALOOP_ENCODED_BYTES_MAX + DATATYPE_ACCESS_OTHER_BYTES_MAX <= HEADER_BYTES_MAX as u64);
const _: () = assert!(DATALOOP_DEPTH_MAX >= 2 && DATALOOP_DEPTH_MAX <= DATALOOP_NODES_MAX);
const _: () = assert!(DATALOOP_NODES_MAX as u64 * DATALOOP_NODE_BYTES_MIN <= DATALOOP_ENCODED_BYTES_MAX);
// Two block-indexed nodes sharing the displacement limit, with their headers, encode within the size limit.
const _: () = assert!(DATALOOP_DISPLACEMENTS_MAX * 8 + 1024 <= DATALOOP_ENCODED_BYTES_MAX);
const _: () = assert!(LEASE_MS_MIN <= LEASE_MS_DEFAULT && LEASE_MS_DEFAULT <= LEASE_MS_MAX);
const _: () = assert!(LOCK_WAIT_MS_MAX < REQUEST_TIMEOUT_MS_DEFAULT);
const _: () = assert!(LOCK_RANGES_MAX as u64 * 20 + 1024 <= HEADER_BYTES_MAX as u64);
const _: () = assert!(LOCK_RANGES_MAX <= LOCK_PIECES_PER_REQUEST_MAX);
const _: () = assert!(LOCK_PIECES_PER_REQUEST_MAX <= LOCK_PIECES_PER_OWNER_MAX);
const _: () = assert!(LOCK_PIECES_PER_OWNER_MAX <= LOCK_PIECES_PER_FILE_MAX);
const _: () = assert!(PARENT_WALK_STEPS_MAX as usize > PATH_BYTES_MAX / 2);
const _: () = assert!(RFS_REGIONS_MAX as u64 * 20 + DATALOOP_ENCODED_BYTES_MAX + 4096 <= RFS_HEADER_BYTES_MAX as u64);
const _: () = assert!(RFS_AUTH_TIMEOUT_MS < RFS_REPLY_TIMEOUT_MS_DEFAULT);
