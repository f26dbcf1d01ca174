//! `weft bench hpio`: the HPIO noncontiguous I/O benchmark with the native
//! client (Ching et al.): region count, region size and region spacing, for
//! the four memory/file cases (c-c, nc-c, c-nc, nc-nc), with the methods
//! posix, list (default chunking), list64 (64 regions per request, the
//! papers' list I/O) and datatype, over P client processes.
//!
//! Layout, for process `p` of `P`, `n` regions of `s` bytes spaced `g`:
//! - contiguous memory: one buffer of `n * s`; noncontiguous memory: region
//!   `i` at `i * (s + g)` of a buffer of `n * (s + g)`;
//! - contiguous file: bytes `[p * n * s, (p + 1) * n * s)`; noncontiguous
//!   file: region `i` at `(i * P + p) * (s + g)` (processes interleaved).
//!
//! Processes: the coordinator re-executes this binary with the same
//! arguments and `WEFT_HPIO_WORKER=case,method,op,rank,file` in the
//! environment; each worker connects, prints `ready`, waits for `go` on
//! stdin, runs, and prints `done`. The time is from `go` to the last
//! `done`, so connection setup is not measured. A reader then checks every
//! byte of its buffer (the regions hold what the write put there, the gaps
//! what they held before) and prints `verified N` or the first wrong byte,
//! which fails the benchmark. One result line (JSON with
//! `--json`) per (op, case, method).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::{Args, ValueEnum};
use serde_json::json;
use weft_client::{BlockingClient, ClientOptions, CreateOptions, Dataloop, FileAccess, IoMethod, MemoryLayout};
use weft_config::Config;

/// Memory/file contiguity cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Case {
    /// Contiguous memory, contiguous file.
    #[value(name = "c-c")]
    CC,
    /// Noncontiguous memory, contiguous file.
    #[value(name = "nc-c")]
    NcC,
    /// Contiguous memory, noncontiguous file.
    #[value(name = "c-nc")]
    CNc,
    /// Noncontiguous memory, noncontiguous file.
    #[value(name = "nc-nc")]
    NcNc,
}

/// Methods compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// One blocking request per contiguous piece.
    Posix,
    /// List I/O with the default chunking (65,536 regions per request).
    List,
    /// List I/O capped at 64 regions per request.
    List64,
    /// Datatype I/O: one request per server.
    Datatype,
}

/// Operations measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// Write, then read back (and check) the same pattern.
    Both,
    /// Write only.
    Write,
    /// Read only (writes first, unmeasured).
    Read,
}

/// Arguments of `weft bench hpio`.
#[derive(Args, Clone, Debug)]
pub struct HpioArgs {
    /// Regions per process.
    #[arg(long, default_value_t = 4096)]
    pub region_count: u64,
    /// Bytes per region.
    #[arg(long, default_value_t = 8)]
    pub region_bytes: u64,
    /// Bytes between regions (memory and file).
    #[arg(long, default_value_t = 128)]
    pub spacing_bytes: u64,
    /// Cases to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Case::CC, Case::NcC, Case::CNc, Case::NcNc])]
    pub cases: Vec<Case>,
    /// Methods to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Method::Posix, Method::List, Method::List64, Method::Datatype])]
    pub methods: Vec<Method>,
    /// Client processes.
    #[arg(long, short = 'p', default_value_t = 1)]
    pub procs: u32,
    /// Operations.
    #[arg(long, value_enum, default_value_t = Op::Both)]
    pub op: Op,
    /// Print one JSON object per result.
    #[arg(long)]
    pub json: bool,
}

const WORKER_ENV: &str = "WEFT_HPIO_WORKER";

/// Runs the benchmark (or, under `WEFT_HPIO_WORKER`, one worker of it).
pub fn hpio(config: Config, args: HpioArgs) -> Result<(), String> {
    if let Ok(spec) = std::env::var(WORKER_ENV) {
        return worker(config, &args, &spec);
    }
    let client = BlockingClient::new(config, ClientOptions::default(), 2).map_err(|e| format!("client: {e:?}"))?;
    let path = format!("/hpio.{}", std::process::id());
    let file = client.create(&path, CreateOptions::default()).map_err(|e| format!("create {path}: {e:?}"))?;
    let bytes = args.region_count * args.region_bytes * args.procs as u64;
    let ops: &[&str] = match args.op {
        Op::Both => &["write", "read"],
        Op::Write => &["write"],
        Op::Read => &["write", "read"],
    };
    let result = (|| {
        for case in &args.cases {
            for method in &args.methods {
                for op in ops {
                    let seconds = run_phase(&args, *case, *method, op, &path)?;
                    if args.op == Op::Read && *op == "write" {
                        continue;
                    }
                    report(&args, *case, *method, op, bytes, seconds, file.layout.datafiles.len());
                }
            }
        }
        Ok(())
    })();
    let _ = client.unlink(&path);
    result
}

fn name<T: ValueEnum>(value: T) -> String {
    value.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
}

fn report(args: &HpioArgs, case: Case, method: Method, op: &str, bytes: u64, seconds: f64, servers: usize) {
    let mib_per_s = bytes as f64 / (1 << 20) as f64 / seconds;
    if args.json {
        let value = json!({
            "bench": "hpio", "op": op, "case": name(case), "method": name(method),
            "processes": args.procs, "region_count": args.region_count, "region_bytes": args.region_bytes,
            "spacing_bytes": args.spacing_bytes, "stripe_count": servers, "bytes": bytes,
            "seconds": seconds, "mib_per_s": mib_per_s, "verified": op == "read",
        });
        println!("{value}");
    } else {
        println!(
            "hpio {op:5} {:6} {:8} P={} n={} s={} g={}: {mib_per_s:10.2} MiB/s ({seconds:.4} s)",
            name(case),
            name(method),
            args.procs,
            args.region_count,
            args.region_bytes,
            args.spacing_bytes
        );
    }
}

/// Starts P workers for one (case, method, op), releases them together and
/// returns the seconds until the last one finished.
fn run_phase(args: &HpioArgs, case: Case, method: Method, op: &str, path: &str) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut workers = Vec::new();
    for rank in 0..args.procs {
        let spec = format!("{},{},{op},{rank},{path}", name(case), name(method));
        let child = Command::new(&exe)
            .args(std::env::args_os().skip(1))
            .env(WORKER_ENV, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting a worker: {e}"))?;
        workers.push(child);
    }
    let mut lines = Vec::new();
    for child in &mut workers {
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.trim() != "ready" {
            return Err(format!("worker failed to start: {line}"));
        }
        lines.push(stdout);
    }
    let start = Instant::now();
    for child in &mut workers {
        let stdin = child.stdin.as_mut().expect("piped");
        stdin.write_all(b"go\n").and_then(|_| stdin.flush()).map_err(|e| e.to_string())?;
    }
    for stdout in &mut lines {
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.trim() != "done" {
            return Err(format!("worker failed: {line}"));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if op != "write" {
        // Each reader checks every byte it read, after the clock stopped.
        for stdout in &mut lines {
            let mut line = String::new();
            stdout.read_line(&mut line).map_err(|e| e.to_string())?;
            if !line.starts_with("verified ") {
                return Err(format!("hpio {} {} read: {}", name(case), name(method), line.trim()));
            }
        }
    }
    for mut child in workers {
        let _ = child.wait();
    }
    Ok(seconds)
}

fn parse<T: ValueEnum>(text: &str) -> Result<T, String> {
    T::from_str(text, true)
}

fn worker(config: Config, args: &HpioArgs, spec: &str) -> Result<(), String> {
    let parts: Vec<&str> = spec.splitn(5, ',').collect();
    let [case, method, op, rank, path] = parts[..] else { return Err(format!("bad worker spec {spec}")) };
    let (case, method): (Case, Method) = (parse(case)?, parse(method)?);
    let rank: u64 = rank.parse().map_err(|_| "bad rank".to_string())?;
    let client = BlockingClient::new(config, ClientOptions::default(), 2).map_err(|e| format!("client: {e:?}"))?;
    let file = client.open(path, 0).map_err(|e| format!("open {path}: {e:?}"))?;
    let (n, s, g, procs) = (args.region_count, args.region_bytes, args.spacing_bytes, args.procs as u64);
    let region = Dataloop::bytes(s).map_err(|e| e.to_string())?;
    let memory_type = Dataloop::hvector(n, 1, (s + g) as i64, &region).map_err(|e| e.to_string())?;
    let file_type = Dataloop::hvector(n, 1, ((s + g) * procs) as i64, &region).map_err(|e| e.to_string())?;
    let contiguous = Dataloop::bytes(n * s).map_err(|e| e.to_string())?;
    let memory_nc = matches!(case, Case::NcC | Case::NcNc);
    let file_nc = matches!(case, Case::CNc | Case::NcNc);
    let buffer_len = if memory_nc { n * (s + g) } else { n * s } as usize;
    let pattern = |i: usize| (i as u64 * 31 + rank) as u8;
    // A read starts from the complement of the pattern: every byte it
    // should fill differs until it does, and the gaps must stay as they are.
    let reading = op != "write";
    let mut buffer: Vec<u8> = (0..buffer_len).map(|i| if reading { !pattern(i) } else { pattern(i) }).collect();
    let memory = if memory_nc {
        MemoryLayout::Datatype { memory_type: &memory_type, count: 1 }
    } else {
        MemoryLayout::Contiguous
    };
    let access = if file_nc {
        FileAccess::Datatype { file_type: &file_type, displacement: (rank * (s + g)) as i64, view_offset: 0 }
    } else {
        FileAccess::Datatype { file_type: &contiguous, displacement: (rank * n * s) as i64, view_offset: 0 }
    };
    let method = match method {
        Method::Posix => IoMethod::Posix,
        Method::List => IoMethod::LIST_DEFAULT,
        Method::List64 => IoMethod::List { regions_per_request: 64 },
        Method::Datatype => IoMethod::Datatype,
    };
    println!("ready");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).map_err(|e| e.to_string())?;
    let result = match op {
        "write" => client.write_noncontig(&file, method, &buffer, memory, access),
        _ => client.read_noncontig(&file, method, &mut buffer, memory, access),
    };
    match result {
        Ok(()) => println!("done"),
        Err(e) => {
            println!("error {e:?}");
            return Ok(());
        }
    }
    if reading {
        // After "done": the coordinator's clock has stopped.
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let (region, stride) = if memory_nc { (s, s + g) } else { (n * s, n * s) };
        match first_wrong_byte(&buffer, region, stride, pattern) {
            None => println!("verified {}", n * s),
            Some(at) => println!(
                "mismatch: memory byte {at} of rank {rank} is {:#04x}, expected {:#04x}",
                buffer[at],
                if (at as u64) % stride < region { pattern(at) } else { !pattern(at) }
            ),
        }
    }
    Ok(())
}

/// The first byte of a read buffer that is wrong: inside the regions
/// (`region` bytes every `stride`) it must be the pattern, in the gaps
/// its complement (what the buffer held before the read).
fn first_wrong_byte(buffer: &[u8], region: u64, stride: u64, pattern: impl Fn(usize) -> u8) -> Option<usize> {
    (0..buffer.len()).find(|&i| {
        let expected = if (i as u64) % stride < region { pattern(i) } else { !pattern(i) };
        buffer[i] != expected
    })
}

#[cfg(test)]
mod tests {
    use super::first_wrong_byte;

    /// A corrupted byte in a region, and a gap the read overwrote, are reported.
    #[test]
    fn a_corrupted_read_is_reported() {
        let pattern = |i: usize| (i * 31 + 1) as u8;
        // 4 regions of 8 bytes, 16 apart.
        let good: Vec<u8> = (0..64).map(|i| if i % 16 < 8 { pattern(i) } else { !pattern(i) }).collect();
        assert_eq!(first_wrong_byte(&good, 8, 16, pattern), None);
        let mut corrupted = good.clone();
        corrupted[35] ^= 1;
        assert_eq!(first_wrong_byte(&corrupted, 8, 16, pattern), Some(35));
        let mut spilled = good.clone();
        spilled[12] = pattern(12);
        assert_eq!(first_wrong_byte(&spilled, 8, 16, pattern), Some(12), "a gap written by the read");
        let unread: Vec<u8> = (0..64).map(|i| !pattern(i)).collect();
        assert_eq!(first_wrong_byte(&unread, 64, 64, pattern), Some(0), "a read that moved nothing");
    }
}
