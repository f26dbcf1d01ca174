//! The client runtime, started on first use (never at load time: the
//! library is also preloaded into `mpirun`, shells and Python).
//!
//! The configuration comes from `WEFT_CONFIG`, or, without it, from the
//! Weft mount a plain path was resolved on ([`crate::mounts`]). A failed
//! start is not cached, so a later call can succeed once the variable is set.
//!
//! Fork: a child process has none of its parent's runtime threads, so the
//! client records the process id it was started in; a forked child that
//! uses Weft starts its own client and runtime lazily (the parent's copy is
//! leaked in the child, never dropped: dropping it would wait for worker
//! threads that do not exist there). A child that never uses Weft costs
//! nothing.

use std::sync::Mutex;

use weft_client::{BlockingClient, ClientOptions};

use crate::error::{MpiClass, MpiResult};

/// Worker threads of the client runtime (the application owns the cores).
const RUNTIME_THREADS: usize = 2;

/// The client of this process and the process id it was started in.
static CLIENT: Mutex<Option<(u32, &'static BlockingClient)>> = Mutex::new(None);

/// The process's client, started on first call (again in a forked child).
pub fn client() -> MpiResult<&'static BlockingClient> {
    let pid = std::process::id();
    let mut guard = CLIENT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((owner, client)) = *guard {
        if owner == pid {
            return Ok(client);
        }
    }
    let path = std::env::var_os("WEFT_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(crate::mounts::adopted_config)
        .ok_or(MpiClass::Io)?;
    let config = weft_config::Config::load(std::path::Path::new(&path)).map_err(|_| MpiClass::Io)?;
    let client: &'static BlockingClient =
        Box::leak(Box::new(BlockingClient::new(config, ClientOptions::default(), RUNTIME_THREADS)?));
    *guard = Some((pid, client));
    Ok(client)
}

/// Runs `future` in the background on the client's runtime (its worker
/// threads never call MPI).
pub fn spawn<F>(future: F) -> MpiResult<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let client = client()?;
    // Entering the runtime from the caller's thread only to hand the task over.
    client.block_on(async move {
        drop(tokio::spawn(future));
    });
    Ok(())
}
