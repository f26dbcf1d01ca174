//! The client runtime, started on first use (never at load time: the
//! library is also preloaded into `mpirun`, shells and Python).
//!
//! The configuration comes from `WEFT_CONFIG`. A failed start is not
//! cached, so a later call can succeed once the variable is set.

use std::sync::{Mutex, OnceLock};

use weft_client::{BlockingClient, ClientOptions};

use crate::error::{MpiClass, MpiResult};

/// Worker threads of the client runtime (the application owns the cores).
const RUNTIME_THREADS: usize = 2;

static CLIENT: OnceLock<BlockingClient> = OnceLock::new();
static STARTING: Mutex<()> = Mutex::new(());

/// The process's client, started on first call.
pub fn client() -> MpiResult<&'static BlockingClient> {
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let _guard = STARTING.lock().map_err(|_| MpiClass::Intern)?;
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let path = std::env::var_os("WEFT_CONFIG").ok_or(MpiClass::Io)?;
    let config = weft_config::Config::load(std::path::Path::new(&path)).map_err(|_| MpiClass::Io)?;
    let client = BlockingClient::new(config, ClientOptions::default(), RUNTIME_THREADS)?;
    Ok(CLIENT.get_or_init(|| client))
}
