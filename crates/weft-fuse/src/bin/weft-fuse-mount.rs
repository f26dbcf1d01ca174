//! A small driver for the mount, used by this crate's tests (the `weft`
//! CLI offers the same as `weft mount` / `weft umount`):
//!
//! ```text
//! weft-fuse-mount --config F [--daemon] [--log F] [--attr-ttl-ms N]
//!                 [--entry-ttl-ms N] [--request-timeout-ms N] [--direct-io]
//!                 [--writeback-cache] MOUNTPOINT
//! weft-fuse-mount --umount [--lazy] MOUNTPOINT
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use weft_fuse::MountOptions;

struct Args {
    config: Option<PathBuf>,
    mountpoint: Option<PathBuf>,
    daemon: bool,
    umount: bool,
    lazy: bool,
    log: Option<PathBuf>,
    options: MountOptions,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        config: None,
        mountpoint: None,
        daemon: false,
        umount: false,
        lazy: false,
        log: None,
        options: MountOptions::default(),
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{word} needs a value"));
        let millis = |text: String| text.parse::<u64>().map(Duration::from_millis).map_err(|e| format!("{text}: {e}"));
        match word.as_str() {
            "--config" => args.config = Some(PathBuf::from(value()?)),
            "--log" => args.log = Some(PathBuf::from(value()?)),
            "--attr-ttl-ms" => args.options.attr_ttl = millis(value()?)?,
            "--entry-ttl-ms" => args.options.entry_ttl = millis(value()?)?,
            "--request-timeout-ms" => args.options.request_timeout = millis(value()?)?,
            "--direct-io" => args.options.direct_io = true,
            "--writeback-cache" => args.options.writeback_cache = true,
            "--daemon" => args.daemon = true,
            "--umount" => args.umount = true,
            "--lazy" => args.lazy = true,
            other if other.starts_with("--") => return Err(format!("unknown option {other}")),
            other => args.mountpoint = Some(PathBuf::from(other)),
        }
    }
    Ok(args)
}

fn run(args: Args) -> Result<(), String> {
    let mountpoint = args.mountpoint.ok_or("MOUNTPOINT missing")?;
    if args.umount {
        return weft_fuse::umount(&mountpoint, args.lazy);
    }
    let config_path =
        args.config.or_else(|| std::env::var_os("WEFT_CONFIG").map(PathBuf::from)).ok_or("--config missing")?;
    let config = weft_config::Config::load(&config_path).map_err(|e| e.to_string())?;
    let options = weft_fuse::MountOptions { config_path: std::path::absolute(&config_path).ok(), ..args.options };
    if args.daemon {
        return weft_fuse::daemonize_then_mount(config, mountpoint, options, args.log);
    }
    weft_fuse::run_mount(config, mountpoint, options)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("WEFT_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    match parse().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("weft-fuse-mount: {message}");
            ExitCode::FAILURE
        }
    }
}
