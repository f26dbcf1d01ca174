//! The pipelined, flow-controlled connection and the pool of connections to
//! every server, shared by clients and servers (servers are clients of each
//! other). Nothing here knows what a request means: it moves frames.
//!
//! Layout:
//! - [`transport`]: one pipelined, flow-controlled connection to one server.
//! - [`pool`]: connections to every server, reconnecting; counts every request.
//! - [`faults`]: test-only fault injection (delay, fail N-th, drop connection).
//! - [`counters`]: requests and bytes per server and per operation kind.
//! - [`auth`]: the proof each connection presents after its hello, and its checks.
#![warn(missing_docs)]

pub mod auth;
pub mod counters;
pub mod faults;
pub mod pool;
pub mod transport;
