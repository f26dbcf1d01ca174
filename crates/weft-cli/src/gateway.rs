//! `weft gateway`: the storage side of remote MPI-IO (weft-rfs).

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use weft_rfs::gateway::{check_exposure, parse_uid_map, serve, Backend, GatewayConfig};
use weft_rfs::store::WeftStore;

/// Arguments of `weft gateway`.
#[derive(clap::Args)]
pub struct GatewayArgs {
    /// Address to listen on (`HOST:PORT`; port 0 picks one). The address
    /// really bound is printed on the first line of standard output.
    #[arg(long)]
    listen: String,
    /// Serve files under this local directory instead of the Weft file
    /// system of `--config`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The file-system key clients must prove (default: the key file of
    /// `--config`, when given).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Run without authentication (loopback addresses only).
    #[arg(long)]
    no_auth: bool,
    /// Remote uid mapping `REMOTE_UID:LOCAL_UID:LOCAL_GID` (repeatable);
    /// clients whose uid is not mapped are refused.
    #[arg(long = "uid-map", value_name = "MAP")]
    uid_map: Vec<String>,
}

/// Runs the gateway in the foreground.
pub fn gateway(config: Option<PathBuf>, args: GatewayArgs) -> Result<(), String> {
    let loaded = match &config {
        Some(path) => Some(weft_config::Config::load(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let key = if args.no_auth {
        None
    } else {
        let path = match (&args.key, &loaded) {
            (Some(path), _) => path.clone(),
            (None, Some(config)) => {
                config.auth.key_file.clone().ok_or("the configuration names no key file; give --key")?
            }
            (None, None) => return Err("give --key (or --config with a key file), or --no-auth on loopback".into()),
        };
        Some(weft_config::load_key(&path).map_err(|e| e.to_string())?)
    };
    let uid_map: HashMap<u32, (u32, u32)> =
        args.uid_map.iter().map(|entry| parse_uid_map(entry)).collect::<Result<_, _>>()?;
    if uid_map.is_empty() {
        return Err("no --uid-map entry: every client would be refused".into());
    }
    let backend = match (args.dir, loaded) {
        (Some(dir), _) => {
            if !dir.is_dir() {
                return Err(format!("{} is not a directory", dir.display()));
            }
            Backend::Local(dir)
        }
        (None, Some(config)) => Backend::Weft(Arc::new(WeftStore::new(config))),
        (None, None) => return Err("give --dir or --config (the Weft file system to serve)".into()),
    };
    let config = Arc::new(GatewayConfig { key, uid_map, backend });
    let listener = TcpListener::bind(&args.listen).map_err(|e| format!("listen on {}: {e}", args.listen))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    check_exposure(&config, &address)?;
    println!("weft gateway listening on {address}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    serve(listener, config).map_err(|e| e.to_string())
}
