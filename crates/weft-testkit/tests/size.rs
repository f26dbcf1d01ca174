//! Exact file sizes with settled stats and growing marks
//! (`weft-server::growth`): concurrent writers from several clients, stats
//! during and after, truncate, kill -9 while growing, and the cost of a
//! stat of a file nobody is writing (one server handling, no gather).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_client::{BlockingClient, CreateOptions, Dataloop, File, Region};
use weft_proto::message::{Reply, Request};
use weft_testkit::{Cluster, ClusterOptions};

/// Writers, records per writer and record bytes (not a strip multiple, so
/// records straddle strips and datafiles).
const WRITERS: u64 = 4;
const RECORDS: u64 = 40;
const RECORD_BYTES: u64 = 10_000;

fn exclusive() -> CreateOptions {
    CreateOptions { exclusive: true, ..Default::default() }
}

/// The byte at `offset` of the pattern every test writes.
fn pattern(offset: u64) -> u8 {
    (offset % 251) as u8
}

fn pattern_range(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(pattern).collect()
}

/// Requests of `kind` every server has served so far.
fn served(c: &BlockingClient, servers: u32, kind: &str) -> u64 {
    (0..servers)
        .map(|id| match c.block_on(c.client().call(id, Request::Counters)).unwrap() {
            Reply::Counters(counters) => {
                counters.kinds.iter().filter(|k| k.kind == kind).map(|k| k.requests).sum::<u64>()
            }
            other => panic!("counters: {other:?}"),
        })
        .sum::<u64>()
}

/// Server-side requests of the kinds a stat may cost, summed over servers.
struct StatCost {
    stat_file: u64,
    collective: u64,
    datafile_sizes: u64,
}

fn stat_cost(c: &BlockingClient, servers: u32) -> StatCost {
    StatCost {
        stat_file: served(c, servers, "stat_file"),
        collective: served(c, servers, "collective"),
        datafile_sizes: served(c, servers, "datafile_sizes"),
    }
}

/// Stats `file` from `c`; returns its size and whether the stat gathered
/// (a collective or size request served anywhere), asserting the stat was
/// one client request handled once.
fn stat_once(c: &BlockingClient, servers: u32, file: &File) -> (u64, bool) {
    let before = stat_cost(c, servers);
    let client_before = c.counters();
    let size = c.block_on(c.client().stat_handle(file.handle)).unwrap().size;
    let sent = c.counters().since(&client_before);
    assert_eq!(sent.total_requests(), 1, "a stat is one client request");
    let after = stat_cost(c, servers);
    assert_eq!(after.stat_file - before.stat_file, 1, "one StatFile handled");
    assert_eq!(after.datafile_sizes, before.datafile_sizes, "no client-style size requests");
    (size, after.collective > before.collective)
}

/// Stats until a stat no longer gathers (the file settled), checking the
/// size every time; then asserts the next stat costs one handling.
fn settle(c: &BlockingClient, servers: u32, file: &File, expected: u64) {
    let start = Instant::now();
    loop {
        let (size, gathered) = stat_once(c, servers, file);
        assert_eq!(size, expected, "stat while settling");
        if !gathered {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "file never settled");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (size, gathered) = stat_once(c, servers, file);
    assert_eq!(size, expected);
    assert!(!gathered, "a settled file's stat gathers nothing");
}

fn read_all(c: &BlockingClient, file: &File, len: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    assert_eq!(c.read_at(file, 0, &mut buf).unwrap() as u64, len);
    buf
}

#[test]
fn concurrent_writers_from_several_clients_leave_an_exact_size() {
    let servers = 4;
    let cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
    let creator = cluster.client();
    let file = creator.create("/shared", exclusive()).unwrap();
    assert_eq!(file.layout.datafiles.len(), servers as usize);
    // Each writer's highest end acknowledged so far.
    let acknowledged: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let writing = Arc::new(AtomicBool::new(true));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (c, file, acknowledged) = (cluster.client(), file.clone(), acknowledged.clone());
            std::thread::spawn(move || {
                for r in 0..RECORDS {
                    let offset = (r * WRITERS + w) * RECORD_BYTES;
                    c.write_at(&file, offset, &pattern_range(offset, RECORD_BYTES)).unwrap();
                    acknowledged[w as usize].fetch_max(offset + RECORD_BYTES, Ordering::SeqCst);
                }
            })
        })
        .collect();
    // A stat from another client while they write is never below what any
    // writer had acknowledged before the stat began.
    let monitor = {
        let (c, file, acknowledged, writing) = (cluster.client(), file.clone(), acknowledged.clone(), writing.clone());
        std::thread::spawn(move || {
            let mut stats = 0;
            while writing.load(Ordering::SeqCst) && stats < 2_000 {
                let floor = acknowledged.iter().map(|a| a.load(Ordering::SeqCst)).max().unwrap();
                let size = c.block_on(c.client().stat_handle(file.handle)).unwrap().size;
                assert!(size >= floor, "stat {size} below an acknowledged end {floor}");
                stats += 1;
            }
            stats
        })
    };
    for writer in writers {
        writer.join().unwrap();
    }
    writing.store(false, Ordering::SeqCst);
    assert!(monitor.join().unwrap() > 0);
    let total = WRITERS * RECORDS * RECORD_BYTES;
    // After the writers are done, another client sees the exact size and bytes.
    let reader = cluster.client();
    assert_eq!(reader.stat("/shared").unwrap().size, total);
    assert_eq!(reader.file_size(&file).unwrap(), total);
    assert!(read_all(&reader, &file, total) == pattern_range(0, total), "bytes differ");
    settle(&reader, servers, &file, total);
    assert_eq!(reader.stat("/shared").unwrap(), cluster.client().stat("/shared").unwrap());
}

#[test]
fn a_file_nobody_writes_is_stated_by_one_server_handling() {
    let servers = 4;
    let cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
    let c = cluster.client();
    let file = c.create("/quiet", exclusive()).unwrap();
    let (size, gathered) = stat_once(&c, servers, &file);
    assert_eq!((size, gathered), (0, false), "a new file is settled");
    // Many writes mark each datafile once, not once per write.
    let marks_before = served(&c, servers, "mark_growing");
    let len = 3 * 64 * 1024 * servers as u64 + 123;
    for (i, chunk) in pattern_range(0, len).chunks(7_000).enumerate() {
        c.write_at(&file, i as u64 * 7_000, chunk).unwrap();
    }
    let marks = served(&c, servers, "mark_growing") - marks_before;
    // A datafile on its metafile's server is marked without a request.
    let metafile_server = c.client().server_of(file.handle).unwrap();
    let remote = file.layout.datafiles.iter().filter(|d| c.client().server_of(**d).unwrap() != metafile_server);
    assert_eq!(marks, remote.count() as u64, "one mark per remote datafile");
    settle(&c, servers, &file, len);
    // A stat by path costs the same: a settled file's entry stat gathers nothing.
    let before = stat_cost(&c, servers);
    assert_eq!(c.stat("/quiet").unwrap().size, len);
    assert_eq!(stat_cost(&c, servers).collective, before.collective);
    assert_eq!(c.file_size(&file).unwrap(), len);
}

#[test]
fn truncate_down_and_up_keeps_the_size_exact() {
    let servers = 4;
    let cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
    let (c, other) = (cluster.client(), cluster.client());
    let file = c.create("/t", exclusive()).unwrap();
    let len = 1_000_000;
    c.write_at(&file, 0, &pattern_range(0, len)).unwrap();
    settle(&other, servers, &file, len);
    for size in [700_001, 65_536, 3, 0, 2_500_000, 131_072] {
        c.truncate_file(&file, size).unwrap();
        assert_eq!(other.stat("/t").unwrap().size, size, "right after truncate to {size}");
        settle(&other, servers, &file, size);
    }
    // Truncate by path, then extend by a write, from different clients.
    other.truncate("/t", 10).unwrap();
    c.write_at(&file, 200_000, b"tail").unwrap();
    assert_eq!(other.stat("/t").unwrap().size, 200_004);
    settle(&other, servers, &file, 200_004);
}

#[test]
fn kill_of_a_server_while_a_file_grows_keeps_its_stat_exact() {
    let servers = 4;
    let mut cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
    let c = cluster.client();
    let file = c.create("/k", exclusive()).unwrap();
    let metafile_server = c.client().server_of(file.handle).unwrap();
    let data_server = (0..servers).find(|s| *s != metafile_server).unwrap();
    let mut len = 0u64;
    for (victim, label) in [(data_server, "data server"), (metafile_server, "metafile's server")] {
        // Growing: written on every stripe, not yet settled.
        let more = 4 * 64 * 1024 + 999;
        c.write_at(&file, len, &pattern_range(len, more)).unwrap();
        len += more;
        cluster.kill(victim);
        cluster.restart(victim);
        let fresh = cluster.client();
        assert_eq!(fresh.stat("/k").unwrap().size, len, "after kill -9 of the {label}");
        settle(&fresh, servers, &file, len);
        assert!(read_all(&fresh, &file, len) == pattern_range(0, len), "bytes after kill of the {label}");
    }
    // A kill after settling changes nothing either.
    cluster.kill(metafile_server);
    cluster.restart(metafile_server);
    let fresh = cluster.client();
    settle(&fresh, servers, &file, len);
}

#[test]
fn list_and_datatype_writes_and_overwrites_mark_too() {
    let servers = 4;
    let cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
    let (c, other) = (cluster.client(), cluster.client());
    let file = c.create("/nc", exclusive()).unwrap();
    // List I/O: 8-byte regions every 40 KiB, the last one extending the file.
    let regions: Vec<Region> = (0..64u64).map(|i| Region { offset: i * 40_960, length: 8 }).collect();
    let memory = [Region { offset: 0, length: 64 * 8 }];
    c.write_list(&file, &pattern_range(0, 64 * 8), &memory, &regions).unwrap();
    let mut len = 63 * 40_960 + 8;
    assert_eq!(other.stat("/nc").unwrap().size, len, "after list I/O");
    settle(&other, servers, &file, len);
    // Datatype I/O: 16 blocks of 8 bytes with a 96 KiB stride from the end.
    let file_type = Dataloop::hvector(16, 1, 96 * 1024, &Dataloop::bytes(8).unwrap()).unwrap();
    let data = pattern_range(0, 16 * 8);
    let contiguous = Dataloop::bytes(data.len() as u64).unwrap();
    c.write_dtype(&file, &data, &contiguous, 1, len as i64, 0, &file_type).unwrap();
    len += 15 * 96 * 1024 + 8;
    assert_eq!(other.stat("/nc").unwrap().size, len, "after datatype I/O");
    settle(&other, servers, &file, len);
    // An overwrite inside the file changes no size but moves mtime.
    let before = other.stat("/nc").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    c.write_at(&file, 1_000, b"overwrite").unwrap();
    let after = other.stat("/nc").unwrap();
    assert_eq!(after.size, len);
    assert!(after.mtime_ns > before.mtime_ns, "an overwrite moves mtime: {} -> {}", before.mtime_ns, after.mtime_ns);
    settle(&other, servers, &file, len);
    assert_eq!(other.stat("/nc").unwrap().mtime_ns, after.mtime_ns, "the settled mtime is the written one");
}
