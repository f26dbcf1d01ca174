//! Server-local byte-range exclusion per datafile, for data sieving.
//!
//! A sieving write reads a covering span, patches its own pieces in memory
//! and writes the whole span back. Any other write landing inside the span
//! between that read and that write-back would be undone by it, so:
//! - a read-modify-write takes its span **exclusively**;
//! - a direct write takes its range **shared**: direct writes never exclude
//!   each other (nonconflicting-writes semantics), only overlapping RMWs.
//!
//! Reads take nothing: an RMW writes back the bytes it read, so a reader
//! sees either the old or the new value of every byte.
//!
//! Laws (checked against brute force in the tests): two held ranges of the
//! same datafile overlap only if both are shared. Each holder holds one range
//! at a time, so waiting cannot deadlock. `lock` blocks, so use it only on
//! the blocking pool; `try_lock` never waits.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};

use weft_proto::Handle;

/// How a range is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeMode {
    /// Direct writes: compatible with each other.
    Shared,
    /// A read-modify-write span: compatible with nothing overlapping.
    Exclusive,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    id: u64,
    start: u64,
    end: u64,
    mode: RangeMode,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    held: HashMap<Handle, Vec<Held>>,
}

/// The range table of one server.
#[derive(Default)]
pub struct RangeLocks {
    table: Mutex<Table>,
    released: Condvar,
}

/// A held range; released on drop.
pub struct RangeGuard<'a> {
    locks: &'a RangeLocks,
    handle: Handle,
    id: u64,
}

fn conflicts(a: &Held, start: u64, end: u64, mode: RangeMode) -> bool {
    let overlap = a.start < end && start < a.end;
    overlap && (a.mode == RangeMode::Exclusive || mode == RangeMode::Exclusive)
}

impl RangeLocks {
    /// Waits until `[start, end)` of `handle` can be held in `mode`, and holds it.
    pub fn lock(&self, handle: Handle, start: u64, end: u64, mode: RangeMode) -> RangeGuard<'_> {
        let mut table = self.table.lock().expect("range table lock");
        loop {
            let busy = table.held.get(&handle).is_some_and(|held| held.iter().any(|h| conflicts(h, start, end, mode)));
            if !busy {
                break;
            }
            table = self.released.wait(table).expect("range table lock");
        }
        table.next_id += 1;
        let id = table.next_id;
        table.held.entry(handle).or_default().push(Held { id, start, end, mode });
        RangeGuard { locks: self, handle, id }
    }

    /// Holds `[start, end)` of `handle` in `mode` if that needs no wait;
    /// `None` otherwise. Never blocks, so the runtime's workers may use it.
    pub fn try_lock(&self, handle: Handle, start: u64, end: u64, mode: RangeMode) -> Option<RangeGuard<'_>> {
        let mut table = self.table.lock().expect("range table lock");
        if table.held.get(&handle).is_some_and(|held| held.iter().any(|h| conflicts(h, start, end, mode))) {
            return None;
        }
        table.next_id += 1;
        let id = table.next_id;
        table.held.entry(handle).or_default().push(Held { id, start, end, mode });
        Some(RangeGuard { locks: self, handle, id })
    }

    /// Datafiles with held ranges (for tests).
    pub fn active_count(&self) -> usize {
        self.table.lock().expect("range table lock").held.len()
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut table = self.locks.table.lock().expect("range table lock");
        if let Some(held) = table.held.get_mut(&self.handle) {
            held.retain(|h| h.id != self.id);
            if held.is_empty() {
                table.held.remove(&self.handle);
            }
        }
        drop(table);
        self.locks.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[test]
    fn shared_ranges_coexist_exclusive_waits() {
        let locks = Arc::new(RangeLocks::default());
        let h = Handle(7);
        let a = locks.lock(h, 0, 10, RangeMode::Shared);
        let b = locks.lock(h, 5, 15, RangeMode::Shared);
        let c = locks.lock(h, 20, 30, RangeMode::Exclusive);
        let entered = Arc::new(AtomicU32::new(0));
        let (l2, e2) = (locks.clone(), entered.clone());
        let waiter = std::thread::spawn(move || {
            let _g = l2.lock(h, 8, 21, RangeMode::Exclusive);
            e2.store(1, Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(entered.load(Ordering::SeqCst), 0);
        drop((a, b));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(entered.load(Ordering::SeqCst), 0, "still overlaps the exclusive [20, 30)");
        drop(c);
        waiter.join().unwrap();
        assert_eq!(entered.load(Ordering::SeqCst), 1);
        assert_eq!(locks.active_count(), 0);
    }

    /// Brute force: many threads take random ranges and mark a per-byte
    /// occupancy map; an exclusive holder must never see another holder.
    #[test]
    fn never_overlaps_an_exclusive_holder() {
        let locks = Arc::new(RangeLocks::default());
        let cells: Arc<Vec<AtomicU32>> = Arc::new((0..64).map(|_| AtomicU32::new(0)).collect());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (locks, cells) = (locks.clone(), cells.clone());
                std::thread::spawn(move || {
                    let mut x = t * 7919 + 1;
                    for _ in 0..300 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let start = (x >> 33) % 60;
                        let end = start + 1 + (x >> 40) % 4;
                        let mode = if (x >> 50) % 2 == 0 { RangeMode::Shared } else { RangeMode::Exclusive };
                        let _g = locks.lock(Handle(1), start, end, mode);
                        let mark = if mode == RangeMode::Exclusive { 1000 } else { 1 };
                        for c in &cells[start as usize..end as usize] {
                            let before = c.fetch_add(mark, Ordering::SeqCst);
                            assert!(before == 0 || (mark == 1 && before < 1000), "conflict");
                        }
                        for c in &cells[start as usize..end as usize] {
                            c.fetch_sub(mark, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
