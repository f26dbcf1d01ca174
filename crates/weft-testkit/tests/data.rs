//! Data path against real servers: random striped writes and reads checked
//! byte for byte against an in-memory model, holes, end of file, and several
//! client processes writing one shared file.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use weft_client::CreateOptions;
use weft_testkit::{weft_bin, Cluster, ClusterOptions};

fn check_model(seed: u64, strip_bytes: u64, stripe_count: u32) {
    let cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes, ..Default::default() });
    let c = cluster.client();
    let file = c.create("/m", CreateOptions { stripe_count: Some(stripe_count), ..Default::default() }).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model: Vec<u8> = Vec::new();
    for step in 0..60 {
        let offset = rng.random_range(0..(strip_bytes * stripe_count as u64 * 6));
        let len = rng.random_range(0..(strip_bytes as usize * 3 + 17));
        if rng.random_bool(0.6) {
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            c.write_at(&file, offset, &data).unwrap();
            let end = offset as usize + len;
            if model.len() < end && len > 0 {
                model.resize(end, 0);
            }
            // An empty write past the end changes nothing (and must not slice past the model).
            if len > 0 {
                model[offset as usize..offset as usize + len].copy_from_slice(&data);
            }
        } else {
            let mut buf = vec![0xAAu8; len];
            let n = c.read_at(&file, offset, &mut buf).unwrap();
            let expected_n = model.len().saturating_sub(offset as usize).min(len);
            assert_eq!(n, expected_n, "seed {seed} step {step}: read length at {offset}+{len}");
            let start = (offset as usize).min(model.len());
            assert!(buf[..n] == model[start..start + n], "seed {seed} step {step}: bytes differ");
        }
    }
    assert_eq!(c.file_size(&file).unwrap(), model.len() as u64, "seed {seed}: size");
    let mut all = vec![0u8; model.len() + 100];
    assert_eq!(c.read_at(&file, 0, &mut all).unwrap(), model.len());
    assert!(all[..model.len()] == model[..], "seed {seed}: final contents");
}

#[test]
fn random_writes_match_model_small_strips() {
    check_model(1, 7, 3);
    check_model(2, 64, 4);
}

#[test]
fn random_writes_match_model_large_strips() {
    check_model(3, 65536, 4);
    check_model(4, 4096, 1);
}

#[test]
fn holes_and_end_of_file() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes: 1000, ..Default::default() });
    let c = cluster.client();
    let f = c.create("/h", CreateOptions::default()).unwrap();
    // Only the last strip of the file is written: everything before is a hole.
    c.write_at(&f, 9_500, b"tail").unwrap();
    assert_eq!(c.file_size(&f).unwrap(), 9_504);
    let mut buf = vec![9u8; 20_000];
    assert_eq!(c.read_at(&f, 0, &mut buf).unwrap(), 9_504);
    assert!(buf[..9_500].iter().all(|b| *b == 0));
    assert_eq!(&buf[9_500..9_504], b"tail");
    // Reading past the end returns nothing.
    assert_eq!(c.read_at(&f, 50_000, &mut buf).unwrap(), 0);
    // A hole in the middle of one server's range reads as zeros.
    c.write_at(&f, 100, b"head").unwrap();
    let mut small = vec![9u8; 200];
    assert_eq!(c.read_at(&f, 0, &mut small).unwrap(), 200);
    assert_eq!(&small[100..104], b"head");
    assert!(small[..100].iter().chain(&small[104..]).all(|b| *b == 0));
}

#[test]
fn read_within_end_of_file_leaves_the_rest_untouched() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes: 1000, ..Default::default() });
    let c = cluster.client();
    let f = c.create("/w", CreateOptions::default()).unwrap();
    c.write_at(&f, 9_500, b"tail").unwrap();
    let read = |offset: u64, buf: &mut [u8]| c.block_on(c.client().read_at_within_eof(&f, offset, buf)).unwrap();
    // Holes before end of file read as zeros; the bytes past it keep their value.
    let mut buf = vec![9u8; 20_000];
    assert_eq!(read(0, &mut buf), 9_504);
    assert!(buf[..9_500].iter().all(|b| *b == 0));
    assert_eq!(&buf[9_500..9_504], b"tail");
    assert!(buf[9_504..].iter().all(|b| *b == 9));
    // read_at zeroes them.
    let mut zeroed = vec![9u8; 20_000];
    assert_eq!(c.read_at(&f, 0, &mut zeroed).unwrap(), 9_504);
    assert!(zeroed[9_504..].iter().all(|b| *b == 0));
    // Entirely past end of file: nothing read, nothing written.
    let mut past = vec![7u8; 3_000];
    assert_eq!(read(9_504, &mut past), 0);
    assert_eq!(read(40_000, &mut past), 0);
    assert!(past.iter().all(|b| *b == 7));
    // Inside the file, over strips no server has written: all zeros, full length.
    let mut inside = vec![5u8; 4_000];
    assert_eq!(read(2_500, &mut inside), 4_000);
    assert!(inside.iter().all(|b| *b == 0));
    // Ending exactly at end of file, starting mid-strip.
    let mut end = vec![5u8; 1_004];
    assert_eq!(read(8_500, &mut end), 1_004);
    assert!(end[..1_000].iter().all(|b| *b == 0));
    assert_eq!(&end[1_000..], b"tail");
}

#[test]
fn large_transfer_streams_in_chunks() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, strip_bytes: 8 << 20, ..Default::default() });
    let c = cluster.client();
    let f = c.create("/big", CreateOptions::default()).unwrap();
    let data: Vec<u8> = (0..24u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    c.write_at(&f, 3, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    assert_eq!(c.read_at(&f, 3, &mut back).unwrap(), data.len());
    assert!(back == data);
    let counts = c.counters();
    // One write and one read request per datafile involved, whatever the size.
    assert_eq!(counts.requests_of("write"), 2);
    assert_eq!(counts.requests_of("read"), 2);
}

/// Child-process mode: when WEFT_TEST_WRITER is set, this test binary acts
/// as one writer process of `shared_file_written_by_four_processes`.
fn writer_process() -> bool {
    let Ok(spec) = std::env::var("WEFT_TEST_WRITER") else { return false };
    let parts: Vec<&str> = spec.split(',').collect();
    let (config, rank, ranks, block, blocks) = (
        parts[0],
        parts[1].parse::<u64>().unwrap(),
        parts[2].parse::<u64>().unwrap(),
        parts[3].parse::<u64>().unwrap(),
        parts[4].parse::<u64>().unwrap(),
    );
    let config = weft_config::Config::load(std::path::Path::new(config)).unwrap();
    let c = weft_client::BlockingClient::new(config, Default::default(), 1).unwrap();
    let f = c.open("/shared", 6).unwrap();
    for i in 0..blocks {
        let offset = (i * ranks + rank) * block;
        let data: Vec<u8> = (0..block).map(|k| pattern(offset + k)).collect();
        c.write_at(&f, offset, &data).unwrap();
    }
    true
}

fn pattern(offset: u64) -> u8 {
    (offset.wrapping_mul(31) ^ (offset >> 9)) as u8
}

#[test]
fn shared_file_written_by_four_processes() {
    if writer_process() {
        return;
    }
    let cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes: 4096, ..Default::default() });
    let c = cluster.client();
    c.create("/shared", CreateOptions::default()).unwrap();
    let (ranks, block, blocks) = (4u64, 1000u64, 300u64);
    let children: Vec<_> = (0..ranks)
        .map(|rank| {
            let spec = format!("{},{rank},{ranks},{block},{blocks}", cluster.config_path.display());
            weft_testkit::command_dying_with_parent(&std::env::current_exe().unwrap())
                .args(["--exact", "shared_file_written_by_four_processes", "--nocapture"])
                .env("WEFT_TEST_WRITER", spec)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let f = c.open("/shared", 4).unwrap();
    let total = ranks * block * blocks;
    let mut buf = vec![0u8; total as usize];
    assert_eq!(c.read_at(&f, 0, &mut buf).unwrap() as u64, total);
    for (i, byte) in buf.iter().enumerate() {
        assert_eq!(*byte, pattern(i as u64), "byte {i}");
    }
    let _ = weft_bin();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    #[test]
    fn random_strip_and_count(seed in 10u64..1000, strip in 1u64..300, count in 1u32..5) {
        check_model(seed, strip, count);
    }
}
