//! Kill rounds: under mixed load (creates, writes with sync, removes,
//! renames) from several clients, a random server is killed with SIGKILL
//! at a random instant, then restarted. After every round, every
//! acknowledged namespace change and every synced byte must be there, and
//! `weft fsck` must be clean.
//!
//! `WEFT_KILL_ROUNDS` sets the rounds (default 2; `scripts/kill-rounds.sh`
//! runs 100), `WEFT_KILL_SEED` the seed (default 1).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use weft_client::{CreateOptions, ErrorCode};
use weft_testkit::{fsck, Cluster, ClusterOptions, FsckReport};

const SERVERS: u32 = 3;
const WORKERS: u64 = 3;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

fn content(id: u64) -> Vec<u8> {
    let length = 1000 + (id * 7919) % 9000;
    (0..length).map(|k| ((k * 7 + id * 13) % 251) as u8).collect()
}

/// What a path is known to hold: `Some(id)` a file with `content(id)` (synced),
/// `None` nothing. Paths whose last change was not acknowledged are unknown (absent from the map).
type Known = BTreeMap<String, Option<u64>>;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One worker's load until `killed`: acknowledged outcomes go to `known`.
fn work(cluster: &Cluster, worker: u64, round: u64, known: &Mutex<Known>, acked: &AtomicU64, killed: &AtomicBool) {
    let c = cluster.client();
    let mut rng = Rng(round * 1000 + worker);
    let mut i = 0u64;
    // Bounded: a round ends at the kill; this caps a round whose kill never comes.
    while !killed.load(Ordering::SeqCst) && i < 2000 {
        i += 1;
        let present: Vec<(String, u64)> = known
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.starts_with(&format!("/w{worker}/")))
            .filter_map(|(path, id)| id.map(|id| (path.clone(), id)))
            .collect();
        let roll = rng.below(10);
        if present.is_empty() || roll < 5 {
            let path = format!("/w{worker}/r{round}-{i}");
            let id = (round * WORKERS + worker) * 100_000 + i;
            known.lock().unwrap().remove(&path);
            let result = (|| {
                let f = c.create(&path, CreateOptions { exclusive: true, ..Default::default() })?;
                c.write_at(&f, 0, &content(id))?;
                c.fsync(&f)
            })();
            if result.is_ok() {
                known.lock().unwrap().insert(path, Some(id));
                acked.fetch_add(1, Ordering::SeqCst);
            }
        } else {
            let (path, id) = present[rng.below(present.len() as u64) as usize].clone();
            // Unknown until acknowledged.
            known.lock().unwrap().remove(&path);
            if roll < 7 {
                if c.unlink(&path).is_ok() {
                    known.lock().unwrap().insert(path, None);
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            } else {
                let to = format!("/w{worker}/r{round}-{i}-renamed");
                known.lock().unwrap().remove(&to);
                if c.rename(&path, &to).is_ok() {
                    let mut known = known.lock().unwrap();
                    known.insert(path, None);
                    known.insert(to, Some(id));
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }
}

fn verify(cluster: &Cluster, known: &Known, round: u64) {
    let c = cluster.client();
    for (path, state) in known {
        match state {
            None => assert_eq!(c.stat(path).unwrap_err(), ErrorCode::NoEntry, "round {round}: {path} came back"),
            Some(id) => {
                let f = c.open(path, 4).unwrap_or_else(|e| panic!("round {round}: {path}: {e}"));
                let want = content(*id);
                let mut buf = vec![0u8; want.len() + 10];
                let n = c.read_at(&f, 0, &mut buf).unwrap();
                assert!(n == want.len() && buf[..n] == want[..], "round {round}: {path}: synced bytes lost");
            }
        }
    }
}

#[test]
fn sigkill_a_random_server_under_mixed_load() {
    let rounds = env_u64("WEFT_KILL_ROUNDS", 2);
    let seed = env_u64("WEFT_KILL_SEED", 1);
    let mut rng = Rng(seed);
    let mut cluster = Cluster::start(ClusterOptions { servers: SERVERS, strip_bytes: 4096, ..Default::default() });
    {
        let c = cluster.client();
        for worker in 0..WORKERS {
            c.mkdir(&format!("/w{worker}"), 0o755).unwrap();
        }
    }
    let known = Mutex::new(Known::new());
    let mut total_acked = 0;
    for round in 0..rounds {
        let victim = rng.below(SERVERS as u64) as u32;
        let target = 5 + rng.below(40);
        let pause_us = rng.below(20_000);
        let acked = AtomicU64::new(0);
        let killed = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for worker in 0..WORKERS {
                let (cluster, known, acked, killed) = (&cluster, &known, &acked, &killed);
                scope.spawn(move || work(cluster, worker, round, known, acked, killed));
            }
            // Bounded wait for the load to reach the kill point.
            for _ in 0..6000 {
                if acked.load(Ordering::SeqCst) >= target {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_micros(pause_us));
            let pid = cluster.pid(victim).expect("victim running");
            // SAFETY: killing a server process this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            killed.store(true, Ordering::SeqCst);
        });
        cluster.kill(victim); // reap
        cluster.restart(victim);
        total_acked += acked.load(Ordering::SeqCst);
        verify(&cluster, &known.lock().unwrap(), round);
        let FsckReport { problems, stdout: report } = fsck(&cluster, false);
        assert_eq!(problems, 0, "round {round}: fsck after killing server {victim}:\n{report}");
    }
    let known = known.into_inner().unwrap();
    let present = known.values().filter(|v| v.is_some()).count();
    eprintln!(
        "kill rounds: {rounds} (seed {seed}), {total_acked} acknowledged operations, {} paths checked ({present} \
         files with synced bytes, {} removed)",
        known.len(),
        known.len() - present
    );
}
