//! The Rust core of `libweft_mpiio`: MPI-IO on `weft:` paths for unmodified
//! MPI programs.
//!
//! MPI's ABI differs between implementations (handle types, constants,
//! combiner values), so no MPI type appears here. A small C layer
//! (`c/weft_mpiio.c`, compiled once per flavour with that flavour's `mpicc`)
//! owns everything MPI: it intercepts every exported `MPI_File_*` symbol,
//! sends non-Weft handles to `PMPI_File_*`, does the collective parts
//! (broadcast of the open result, barriers), decodes datatypes with
//! `MPI_Type_get_envelope`/`get_contents` into the flat postfix program of
//! [`types`], and maps the error classes of [`error`] to its `mpi.h`. This
//! crate owns files, views, file pointers and data movement.
//!
//! Layout:
//! - [`error`]: Weft errors to flavour-neutral MPI error classes.
//! - [`runtime`]: the lazily started client (configuration from `WEFT_CONFIG`).
//! - [`mounts`]: plain paths on a Weft FUSE mount, resolved to Weft files.
//! - [`types`]: datatype programs to dataloops, and the type registry.
//! - [`compact`]: struct/indexed types beyond the dataloop's limits as
//!   compact loops (a repeating period of entries).
//! - [`file`]: open files: view, individual file pointer, reads and writes.
//! - [`ffi`]: the narrow C ABI, every call behind a panic guard.
//! - [`nonblocking`]: accesses moving in the background, completed from
//!   the application's thread (`MPI_File_i*`, split collectives).
//! - [`shared`]: shared file pointers (server sessions) and atomic mode (byte-range locks), with their C ABI.
//! - [`collective`]: two-phase collective buffering (plans, windows) and its C ABI.
//! - [`object_cache`]: the object cache (`weft_cache=objects`) and atomic mode by objects.
//! - [`objects`]: objects from views (maximal regions by accessor set; issue 14).
//! - [`posix`]: POSIX calls (`open`, `access`, `truncate`, `unlink`) on
//!   `weft:` names, for libraries that probe their files outside MPI-IO.
//! - [`remote`]: `rfs:` (remote MPI-IO through a gateway) and `discard:`
//!   names, with ABT (weft-rfs layers under the same views and pointers).
//! - [`posix_writable`]: serial read-write descriptors on `weft:` names
//!   (a private copy written back at `fsync`/`close`).
#![warn(missing_docs)]

pub mod atomic_locks;
pub mod collective;
pub mod compact;
pub mod error;
pub mod ffi;
pub mod file;
pub mod mounts;
pub mod nonblocking;
pub mod object_cache;
pub mod objects;
pub mod posix;
pub mod posix_writable;
pub mod remote;
pub mod runtime;
pub mod shared;
pub mod types;
