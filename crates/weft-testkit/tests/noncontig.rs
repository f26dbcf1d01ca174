//! Noncontiguous I/O against real servers: the three methods (posix, list,
//! datatype) checked byte for byte against an in-memory model and against
//! each other, exact request counts, the papers' access patterns as
//! fixtures, and hostile datatype requests.
//!
//! The ROMIO coll_perf fixture is scaled down from a 600^3 array of doubles
//! (1.7 GB, too large for the test machine) to 120^3 (13.8 MB), still split
//! into the 2 x 2 x 2 blocks of 8 processes.

use rand::{Rng, SeedableRng};
use weft_client::{BlockingClient, CreateOptions, Dataloop, File, FileAccess, IoMethod, MemoryLayout, Region};
use weft_dataloop::mpi_types::{subarray, Order};
use weft_proto::message::{DatatypeAccess, Request};
use weft_proto::ErrorCode;
use weft_testkit::{Cluster, ClusterOptions};

const METHODS: [IoMethod; 4] =
    [IoMethod::Posix, IoMethod::List { regions_per_request: 3 }, IoMethod::LIST_DEFAULT, IoMethod::Datatype];

fn create(c: &BlockingClient, path: &str, stripe_count: u32) -> File {
    c.create(path, CreateOptions { stripe_count: Some(stripe_count), ..Default::default() }).unwrap()
}

fn read_all(c: &BlockingClient, file: &File, len: usize) -> Vec<u8> {
    let mut all = vec![0u8; len];
    let n = c.read_at(file, 0, &mut all).unwrap();
    all.truncate(n);
    all
}

/// Random disjoint file regions in shuffled order, and a memory list of the
/// same total length cut at different places.
fn random_access(rng: &mut rand::rngs::StdRng, span: u64) -> (Vec<Region>, Vec<Region>, usize) {
    let mut file = Vec::new();
    let mut at = rng.random_range(0..64);
    while at < span {
        let length = rng.random_range(1..48);
        file.push(Region::new(at, length));
        at += length + rng.random_range(0..80);
    }
    for i in (1..file.len()).rev() {
        if rng.random_bool(0.3) {
            let j = rng.random_range(0..=i);
            file.swap(i, j);
        }
    }
    let total: u64 = file.iter().map(|r| r.length).sum();
    let mut memory = Vec::new();
    let (mut done, mut offset) = (0u64, 5u64);
    while done < total {
        let length = rng.random_range(1..40).min(total - done);
        memory.push(Region::new(offset, length));
        done += length;
        offset += length + rng.random_range(0..9);
    }
    (file, memory, offset as usize + 3)
}

#[test]
fn random_lists_all_methods_match_model() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes: 64, ..Default::default() });
    let c = cluster.client();
    let files: Vec<File> = (0..METHODS.len()).map(|m| create(&c, &format!("/m{m}"), 4)).collect();
    let mut model: Vec<u8> = Vec::new();
    for seed in 0..12u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (file_regions, memory_regions, buffer_len) = random_access(&mut rng, 4000);
        let buffer: Vec<u8> = (0..buffer_len).map(|_| rng.random()).collect();
        let memory = MemoryLayout::List(&memory_regions);
        let access = FileAccess::List(&file_regions);
        for (method, file) in METHODS.iter().zip(&files) {
            c.write_noncontig(file, *method, &buffer, memory, access)
                .unwrap_or_else(|e| panic!("seed {seed} {method:?}: {e:?}"));
        }
        let pieces = weft_dataloop::regions::zip_lists(&memory_regions, &file_regions).unwrap();
        for p in &pieces {
            let end = (p.file_offset + p.length) as usize;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[p.file_offset as usize..end]
                .copy_from_slice(&buffer[p.memory_offset as usize..(p.memory_offset + p.length) as usize]);
        }
        // Read back a different random access with every method from every file.
        let (read_regions, read_memory, read_len) = random_access(&mut rng, 4200);
        let mut expected = vec![0xAAu8; read_len];
        for p in weft_dataloop::regions::zip_lists(&read_memory, &read_regions).unwrap() {
            for k in 0..p.length {
                let byte = model.get((p.file_offset + k) as usize).copied().unwrap_or(0);
                expected[(p.memory_offset + k) as usize] = byte;
            }
        }
        for (method, file) in METHODS.iter().zip(&files) {
            let mut got = vec![0xAAu8; read_len];
            c.read_noncontig(
                file,
                *method,
                &mut got,
                MemoryLayout::List(&read_memory),
                FileAccess::List(&read_regions),
            )
            .unwrap();
            assert!(got == expected, "seed {seed}: {method:?} read differs from the model");
        }
    }
    for file in &files {
        assert!(read_all(&c, file, model.len() + 64) == model, "final contents differ from the model");
    }
}

#[test]
fn datatype_memory_and_views_all_methods_agree() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes: 100, ..Default::default() });
    let c = cluster.client();
    let files: Vec<File> = (0..METHODS.len()).map(|m| create(&c, &format!("/v{m}"), 3)).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(77);
    let int = Dataloop::bytes(4).unwrap();
    // File view: blocks of 3 ints every 7 ints, from byte 13; memory: 2 ints every 5.
    let file_type = Dataloop::vector(5, 3, 7, &int).unwrap();
    let memory_type = Dataloop::vector(6, 2, 5, &int).unwrap();
    let memory_count = 10u64;
    let total = memory_count * memory_type.size();
    let buffer_len = (memory_count as i64 * memory_type.extent()) as usize;
    let mut model = Vec::new();
    for round in 0..6u64 {
        let buffer: Vec<u8> = (0..buffer_len).map(|_| rng.random()).collect();
        let view_offset = rng.random_range(0..200);
        let memory = MemoryLayout::Datatype { memory_type: &memory_type, count: memory_count };
        let access = FileAccess::Datatype { file_type: &file_type, displacement: 13, view_offset };
        for (method, file) in METHODS.iter().zip(&files) {
            c.write_noncontig(file, *method, &buffer, memory, access).unwrap();
        }
        // Model: expand both sides byte by byte.
        let count = (view_offset + total).div_ceil(file_type.size());
        let mut file_bytes = Vec::new();
        for r in weft_dataloop::Cursor::new(&file_type, count, 13).unwrap().collect_all() {
            file_bytes.extend(r.offset..r.offset + r.length);
        }
        let mut memory_bytes = Vec::new();
        for r in weft_dataloop::Cursor::new(&memory_type, memory_count, 0).unwrap().collect_all() {
            memory_bytes.extend(r.offset..r.offset + r.length);
        }
        for (k, m) in memory_bytes.iter().enumerate() {
            let f = file_bytes[view_offset as usize + k] as usize;
            if model.len() <= f {
                model.resize(f + 1, 0);
            }
            model[f] = buffer[*m as usize];
        }
        for (method, file) in METHODS.iter().zip(&files) {
            let mut got = vec![0u8; buffer_len];
            c.read_noncontig(file, *method, &mut got, memory, access).unwrap();
            for (k, m) in memory_bytes.iter().enumerate() {
                let f = file_bytes[view_offset as usize + k] as usize;
                assert_eq!(got[*m as usize], model[f], "round {round} {method:?} byte {k}");
            }
        }
    }
    for file in &files {
        assert!(read_all(&c, file, model.len() + 10) == model);
    }
}

/// 1,048,576 regions of 8 bytes (16-byte stride) over 4 servers.
#[test]
fn exact_request_counts() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    let file = create(&c, "/counts", 4);
    let regions = 1u64 << 20;
    let file_type = Dataloop::hvector(regions, 1, 16, &Dataloop::bytes(8).unwrap()).unwrap();
    let data: Vec<u8> = (0..regions * 8).map(|i| (i * 7 % 251) as u8).collect();
    let contiguous = Dataloop::bytes(data.len() as u64).unwrap();
    let before_servers: Vec<_> = (0..4).map(|s| c.server_counters(s).unwrap()).collect();
    let before = c.counters();
    c.write_dtype(&file, &data, &contiguous, 1, 0, 0, &file_type).unwrap();
    let spent = c.counters().since(&before);
    assert_eq!(spent.requests_of("write_datatype"), 4, "{spent:?}");
    assert_eq!(spent.total_requests(), 4, "{spent:?}");
    for s in 0..4 {
        assert_eq!(spent.requests_to(s), 1);
    }
    // The servers walked 262,144 pieces each with far fewer syscalls.
    for s in 0..4u32 {
        let after = c.server_counters(s).unwrap();
        let walked = after.regions_visited - before_servers[s as usize].regions_visited;
        let syscalls = after.syscalls - before_servers[s as usize].syscalls;
        assert_eq!(walked, regions / 4, "server {s}");
        assert!(syscalls * 1000 < walked, "server {s}: {syscalls} syscalls for {walked} pieces");
    }
    let before = c.counters();
    let mut back = vec![0u8; data.len()];
    c.read_dtype(&file, &mut back, &contiguous, 1, 0, 0, &file_type).unwrap();
    assert_eq!(c.counters().since(&before).requests_of("read_datatype"), 4);
    assert!(back == data);
    // Contiguous read: interleaved with zeros.
    let mut raw = read_all(&c, &file, (regions * 16) as usize);
    assert_eq!(raw.len() as u64, regions * 16 - 8, "the file ends with the last region");
    raw.resize((regions * 16) as usize, 0);
    assert!(raw.chunks(16).zip(data.chunks(8)).all(|(r, d)| &r[..8] == d && r[8..] == [0; 8]));
    // List I/O: 262,144 local regions per server in requests of 65,536.
    let file_regions: Vec<Region> = (0..regions).map(|i| Region::new(i * 16, 8)).collect();
    let memory = [Region::new(0, data.len() as u64)];
    let before = c.counters();
    c.read_list(&file, &mut back, &memory, &file_regions).unwrap();
    let spent = c.counters().since(&before);
    assert_eq!(spent.requests_of("read_list"), 16, "{spent:?}");
    assert_eq!(spent.total_requests(), 16);
    assert!(back == data);
    // Small count: 1,000 regions -> list at 64 costs 4 x ceil(250 / 64); posix one per region.
    let small = &file_regions[..1000];
    let small_memory = [Region::new(0, 8000)];
    let before = c.counters();
    c.write_noncontig(
        &file,
        IoMethod::List { regions_per_request: 64 },
        &data[..8000],
        MemoryLayout::List(&small_memory),
        FileAccess::List(small),
    )
    .unwrap();
    assert_eq!(c.counters().since(&before).requests_of("write_list"), 16);
    let before = c.counters();
    c.write_noncontig(
        &file,
        IoMethod::Posix,
        &data[..8000],
        MemoryLayout::List(&small_memory),
        FileAccess::List(small),
    )
    .unwrap();
    let spent = c.counters().since(&before);
    assert_eq!((spent.requests_of("write"), spent.total_requests()), (1000, 1000));
}

fn double_at(value: u64) -> [u8; 8] {
    (value as f64).to_le_bytes()
}

/// ROMIO coll_perf: each of 8 processes writes its 60^3 block of a 120^3 array.
#[test]
fn fixture_coll_perf_block() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    let file = create(&c, "/coll_perf", 4);
    let (n, half) = (120u64, 60u64);
    let double = Dataloop::bytes(8).unwrap();
    let contiguous = Dataloop::bytes(half * half * half * 8).unwrap();
    for rank in 0..8u64 {
        let starts = [(rank >> 2 & 1) * half, (rank >> 1 & 1) * half, (rank & 1) * half];
        let block = subarray(3, &[n, n, n], &[half; 3], &starts, Order::C, &double).unwrap();
        let mut buf = Vec::with_capacity((half * half * half * 8) as usize);
        for z in 0..half {
            for y in 0..half {
                for x in 0..half {
                    buf.extend_from_slice(&double_at(((starts[0] + z) * n + starts[1] + y) * n + starts[2] + x));
                }
            }
        }
        let before = c.counters();
        c.write_dtype(&file, &buf, &contiguous, 1, 0, 0, &block).unwrap();
        assert_eq!(c.counters().since(&before).total_requests(), 4);
    }
    let all = read_all(&c, &file, (n * n * n * 8) as usize);
    assert_eq!(all.len() as u64, n * n * n * 8);
    assert!(all.chunks(8).enumerate().all(|(i, v)| v == double_at(i as u64)));
}

/// FLASH checkpoint: 80 blocks of 8^3 interior cells with 4 guard cells,
/// 24 variables, variables fastest in memory; the file is variable-major,
/// then every process' 80 blocks (2 processes here).
#[test]
fn fixture_flash_checkpoint() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    let file = create(&c, "/flash", 4);
    let double = Dataloop::bytes(8).unwrap();
    let variable = |v: u64| {
        subarray(5, &[24, 16, 16, 16, 80], &[1, 8, 8, 8, 80], &[v, 4, 4, 4, 0], Order::Fortran, &double).unwrap()
    };
    let all_vars: Vec<i64> = (0..24).map(|v| v * 8).collect();
    let memory_type = Dataloop::hindexed_block(1, &all_vars, &variable(0)).unwrap();
    let (processes, per_process) = (2u64, 80 * 4096u64);
    let file_type =
        Dataloop::hvector(24, 1, (processes * per_process) as i64, &Dataloop::bytes(per_process).unwrap()).unwrap();
    let value = |p: u64, v: u64, b: u64, z: u64, y: u64, x: u64| ((((p * 24 + v) * 80 + b) * 8 + z) * 8 + y) * 8 + x;
    let mut unk = vec![0xFFu8; 24 * 16 * 16 * 16 * 80 * 8];
    for p in 0..processes {
        for b in 0..80 {
            for z in 0..8 {
                for y in 0..8 {
                    for x in 0..8 {
                        for v in 0..24 {
                            let cell = (((b * 16 + z + 4) * 16 + y + 4) * 16 + x + 4) * 24 + v;
                            unk[cell as usize * 8..cell as usize * 8 + 8]
                                .copy_from_slice(&double_at(value(p, v, b, z, y, x)));
                        }
                    }
                }
            }
        }
        let before = c.counters();
        c.write_dtype(&file, &unk, &memory_type, 1, (p * per_process) as i64, 0, &file_type).unwrap();
        assert_eq!(c.counters().since(&before).total_requests(), 4);
    }
    let all = read_all(&c, &file, (24 * processes * per_process) as usize);
    let mut expected = Vec::with_capacity(all.len());
    for v in 0..24 {
        for p in 0..processes {
            for b in 0..80 {
                for z in 0..8 {
                    for y in 0..8 {
                        for x in 0..8 {
                            expected.extend_from_slice(&double_at(value(p, v, b, z, y, x)));
                        }
                    }
                }
            }
        }
    }
    assert!(all == expected);
}

/// Tile reader: a 3 x 2 wall of 1024 x 768 tiles of 3-byte pixels,
/// overlapping 270 px horizontally and 128 px vertically.
#[test]
fn fixture_tile_reader() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    let file = create(&c, "/frame", 4);
    let (overlap_x, overlap_y) = (270u64, 128u64);
    let (width, height) = (3 * 1024 - 2 * overlap_x, 2 * 768 - overlap_y);
    let pixel_value = |row: u64, column: u64| -> [u8; 3] {
        let v = row * width + column;
        [v as u8, (v >> 8) as u8, (v >> 16) as u8]
    };
    let pixel = Dataloop::bytes(3).unwrap();
    let contiguous = Dataloop::bytes(1024 * 768 * 3).unwrap();
    let tiles: Vec<(Dataloop, [u64; 2])> = (0..2u64)
        .flat_map(|row| (0..3u64).map(move |column| (row, column)))
        .map(|(row, column)| {
            let starts = [row * (768 - overlap_y), column * (1024 - overlap_x)];
            (subarray(2, &[height, width], &[768, 1024], &starts, Order::C, &pixel).unwrap(), starts)
        })
        .collect();
    for (tile, starts) in &tiles {
        let mut buf = Vec::with_capacity(1024 * 768 * 3);
        for r in 0..768 {
            for x in 0..1024 {
                buf.extend_from_slice(&pixel_value(starts[0] + r, starts[1] + x));
            }
        }
        c.write_dtype(&file, &buf, &contiguous, 1, 0, 0, tile).unwrap();
        let mut back = vec![0u8; buf.len()];
        let before = c.counters();
        c.read_dtype(&file, &mut back, &contiguous, 1, 0, 0, tile).unwrap();
        assert_eq!(c.counters().since(&before).total_requests(), 4);
        assert!(back == buf);
    }
    let all = read_all(&c, &file, (width * height * 3) as usize);
    assert_eq!(all.len() as u64, width * height * 3);
    let ok = (0..height).all(|r| {
        (0..width).all(|x| {
            let at = ((r * width + x) * 3) as usize;
            all[at..at + 3] == pixel_value(r, x)
        })
    });
    assert!(ok, "frame differs");
}

#[test]
fn hostile_datatype_requests_get_errors_and_server_keeps_serving() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let c = cluster.client();
    let file = create(&c, "/hostile", 2);
    c.write_at(&file, 0, &[7u8; 1000]).unwrap();
    let handle = file.layout.datafiles[0];
    let server = c.client().server_of(handle).unwrap();
    let good = Dataloop::hvector(10, 1, 16, &Dataloop::bytes(8).unwrap()).unwrap().encode();
    let access = |dataloop: Vec<u8>, count: u64, stream_length: u64, stripe_index: u32| DatatypeAccess {
        handle,
        dataloop,
        count,
        displacement: 0,
        stream_start: 0,
        stream_length,
        distribution: file.layout.distribution,
        stripe_index,
    };
    let mut truncated = good.clone();
    truncated.truncate(good.len() - 3);
    let mut garbage = vec![0xFFu8; 4096];
    garbage[..good.len().min(8)].copy_from_slice(&good[..good.len().min(8)]);
    let cases = vec![
        access(vec![], 1, 80, 0),
        access(vec![0xAB; 1000], 1, 80, 0),
        access(truncated, 1, 80, 0),
        access(garbage, 1, 80, 0),
        access(good.clone(), u64::MAX, 80, 0), // size overflows
        access(good.clone(), 1, 81, 0),        // beyond the access
        access(good.clone(), 1, 80, 7),        // stripe index out of range
        access(good.clone(), 1, u64::MAX, 0),
    ];
    for (i, a) in cases.into_iter().enumerate() {
        let reply = c.block_on(c.client().call(server, Request::ReadDatatype { access: a.clone() }));
        assert!(reply.is_err(), "case {i}: {reply:?}");
        let reply = c.block_on(c.client().call(server, Request::WriteDatatype { access: a, packed_length: 40 }));
        assert!(reply.is_err(), "case {i}: {reply:?}");
    }
    let too_many = Request::ReadList { handle, regions: vec![(0, 1); 70_000], total_length: 70_000 };
    assert_eq!(c.block_on(c.client().call(server, too_many)), Err(ErrorCode::Invalid));
    let mismatch = Request::ReadList { handle, regions: vec![(0, 1); 4], total_length: 5 };
    assert_eq!(c.block_on(c.client().call(server, mismatch)), Err(ErrorCode::Invalid));
    // Still serving, data intact.
    let mut back = vec![0u8; 1000];
    assert_eq!(c.read_at(&file, 0, &mut back).unwrap(), 1000);
    assert!(back.iter().all(|b| *b == 7));
    let counters = c.server_counters(server).unwrap();
    assert!(counters.kinds.iter().any(|k| k.kind == "read_datatype" && k.requests >= 8));
}

/// Two clients write interleaved 8-byte regions of the same bytes at once:
/// every write is a sieving read-modify-write on the servers, and none may
/// write back a stale copy of the other client's regions.
#[test]
fn concurrent_interleaved_sieving_writes_lose_nothing() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, strip_bytes: 4096, ..Default::default() });
    let setup = cluster.client();
    let file = create(&setup, "/interleaved", 2);
    let regions = 8192u64;
    let threads: Vec<_> = (0..2u64)
        .map(|who| {
            let (c, file) = (cluster.client(), file.clone());
            std::thread::spawn(move || {
                let file_type = Dataloop::hvector(regions, 1, 16, &Dataloop::bytes(8).unwrap()).unwrap();
                let contiguous = Dataloop::bytes(regions * 8).unwrap();
                for round in 0..20u64 {
                    let data = vec![(who * 100 + round) as u8 + 1; (regions * 8) as usize];
                    c.write_dtype(&file, &data, &contiguous, 1, (who * 8) as i64, 0, &file_type).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let all = read_all(&setup, &file, (regions * 16) as usize);
    assert_eq!(all.len() as u64, regions * 16);
    for (i, chunk) in all.chunks(8).enumerate() {
        let expected = if i % 2 == 0 { 20 } else { 120 };
        assert!(chunk.iter().all(|b| *b == expected), "region {i}: {chunk:?}");
    }
    let sieved: u64 = (0..2).map(|s| setup.server_counters(s).unwrap().sieve_spans).sum();
    assert!(sieved > 0, "the writes were expected to sieve");
}
