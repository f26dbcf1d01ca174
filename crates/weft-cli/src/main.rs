//! `weft`: one binary for servers, the local cluster, file operations and
//! benchmarks. Every command that talks to a file system finds it through
//! `--config F` or `WEFT_CONFIG`. Paths inside Weft are written `weft:/path`;
//! plain paths are local.

mod bench;
mod cluster;
mod files;
mod fsck;
mod gateway;
mod hpio;
mod locks;
mod monitor;
mod rpc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Weft: a parallel file system for HPC.
#[derive(Parser)]
#[command(name = "weft", version, about)]
struct Cli {
    /// File-system configuration (default: $WEFT_CONFIG).
    #[arg(long, global = true, env = "WEFT_CONFIG")]
    config: Option<PathBuf>,
    /// Inject faults into this process's client connections (testing
    /// only): a comma-separated list of `delay_ms=N`, `fail_nth=N`,
    /// `drop_after=N`. A malformed list is an error. `bench` passes it on to
    /// its worker processes.
    #[arg(long, global = true, value_name = "SPEC", value_parser = weft_client::faults::FaultConfig::parse)]
    faults: Option<weft_client::faults::FaultConfig>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a configuration file for N servers on one host.
    Genconfig(cluster::GenconfigArgs),
    /// Initialise server storage (creates the root directory).
    Mkfs(cluster::MkfsArgs),
    /// Run one server in the foreground.
    Server(cluster::ServerArgs),
    /// Start a local file system in the background.
    Up(cluster::UpArgs),
    /// Stop what `weft up` started.
    Down(cluster::DownArgs),
    /// Check that every server answers, with latency.
    Ping,
    /// List a directory.
    Ls(files::LsArgs),
    /// Copy files between local paths and weft: paths.
    Cp(files::CpArgs),
    /// Create directories.
    Mkdir(files::MkdirArgs),
    /// Remove files or directories.
    Rm(files::RmArgs),
    /// Show attributes.
    Stat(files::PathArgs),
    /// Show space per server and in total.
    Statfs,
    /// Show a file's layout: servers, datafiles, strip size, stripe count.
    Layout(files::PathArgs),
    /// Write a file's contents to standard output.
    Cat(files::PathArgs),
    /// Mount the file system with FUSE (foreground unless --daemon).
    Mount(cluster::MountArgs),
    /// Unmount a FUSE mount.
    Umount(cluster::UmountArgs),
    /// Benchmarks (print JSON with --json).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Every server's counters, collected through one tree query.
    Stats(monitor::StatsArgs),
    /// Check consistency online (read-only unless --repair).
    Fsck(fsck::FsckArgs),
    /// Serve remote MPI-IO (`rfs:HOST:PORT:/path` names) against Weft or a local directory.
    Gateway(gateway::GatewayArgs),
}

fn main() -> ExitCode {
    // Bulk transfers allocate and free 1 MiB chunk buffers all the time; with
    // glibc's defaults each one is a fresh mmap whose pages fault in zeroed
    // (measured: a third of the data path's CPU). Keep them on the heap.
    // SAFETY: mallopt only tunes the allocator; called before any threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
    // Behave like other Unix tools when the reader of our output goes away (`weft ls | head`).
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEFT_LOG").unwrap_or_else(|_| "warn,weft=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Some(faults) = cli.faults.clone().filter(|f| f.is_active()) {
        eprintln!("weft: injecting faults: {}", faults.to_spec());
        weft_client::set_process_faults(faults);
    }
    let result = match cli.command {
        Command::Genconfig(args) => cluster::genconfig(args),
        Command::Mkfs(args) => cluster::mkfs(cli.config, args),
        Command::Server(args) => cluster::server(cli.config, args),
        Command::Up(args) => cluster::up(args),
        Command::Down(args) => cluster::down(args),
        Command::Ping => files::ping(cli.config),
        Command::Ls(args) => files::ls(cli.config, args),
        Command::Cp(args) => files::cp(cli.config, args),
        Command::Mkdir(args) => files::mkdir(cli.config, args),
        Command::Rm(args) => files::rm(cli.config, args),
        Command::Stat(args) => files::stat(cli.config, args),
        Command::Statfs => files::statfs(cli.config),
        Command::Layout(args) => files::layout(cli.config, args),
        Command::Cat(args) => files::cat(cli.config, args),
        Command::Mount(args) => cluster::mount(cli.config, args),
        Command::Umount(args) => cluster::umount(args),
        Command::Bench(command) => bench::run(cli.config, command),
        Command::Stats(args) => monitor::stats(cli.config, args),
        Command::Fsck(args) => match fsck::fsck(cli.config, args) {
            Ok(fsck::Verdict::Clean) => Ok(()),
            Ok(fsck::Verdict::Problems { found, repaired }) => {
                eprintln!("weft: fsck found {found} problem(s), repaired {repaired}");
                return ExitCode::from(fsck::Verdict::PROBLEMS_EXIT);
            }
            Err(message) => Err(message),
        },
        Command::Gateway(args) => gateway::gateway(cli.config, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("weft: {message}");
            ExitCode::FAILURE
        }
    }
}
