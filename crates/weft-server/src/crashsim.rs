//! Deterministic crash simulation of the metadata path (tests only).
//!
//! A simulated disk holds the store (`meta.redb`, through redb's
//! `StorageBackend`) and the write-ahead log (through [`LogFile`]). It
//! keeps, per file, the bytes as the running process sees them and the
//! bytes that are durable, plus the writes and length changes made since
//! the last sync. A seed picks the write or sync at which the power fails:
//! that call and every later one returns `EIO` and changes nothing durable
//! (the call that fails may still land, torn). The disk after the crash is
//! the durable bytes plus all, none, or a random subset of the unsynced
//! changes, each write torn at 4 KiB boundaries in the random case (the
//! crash model in docs/FORMAT.md). The server's metadata path (store,
//! log, committer) is then opened on that disk, as a restart would, and
//! checked against a model of the acknowledged operations:
//! - every acknowledged change is there, and the one operation in flight at
//!   the crash is either wholly there or wholly absent;
//! - nothing removed comes back (the objects table holds exactly the
//!   model's objects);
//! - object ids are never reused (a create after recovery gets an id never
//!   acknowledged before, and every id is below its durable reservation);
//! - fsck-like consistency: directory entries and readdir rows agree, and
//!   each directory's entry count matches.
//!
//! `WEFT_CRASH_SEEDS` (default 2,000) sets how many seeds the test runs,
//! `WEFT_CRASH_SEED_START` the first one (to replay a failure).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex};

use weft_proto::message::{ObjectKind, Reply};
use weft_proto::{ErrorCode, Handle};

use crate::committer::{Committer, Operation};
use crate::reserve::Headroom;
use crate::store::{ObjectRecord, Store};
use crate::wal::{LogFile, Wal};

/// Unsynced writes may tear at this granularity.
const TEAR_BYTES: u64 = 4096;
/// A small log, so batches often find it full and are made durable in the store itself.
const WAL_BYTES: u64 = 16 << 10;
/// Operations per seed.
const OPERATIONS: usize = 40;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// What survives of the unsynced changes.
#[derive(Clone, Copy, Debug)]
enum Survivors {
    All,
    None,
    Random,
}

enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Default)]
struct SimFile {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

fn apply(bytes: &mut Vec<u8>, pending: &Pending) {
    match pending {
        Pending::Write(offset, data) => {
            let end = *offset as usize + data.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[*offset as usize..end].copy_from_slice(data);
        }
        Pending::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}

#[derive(Default)]
struct DiskState {
    files: BTreeMap<&'static str, SimFile>,
    /// Writes, length changes and syncs so far.
    operations: u64,
    /// The operation at which the power fails (0: never).
    crash_at: u64,
    crashed: bool,
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl DiskState {
    /// Counts one changing call; `Err` if the power is off, `Ok(true)` if it fails at this one.
    fn step(&mut self) -> io::Result<bool> {
        if self.crashed {
            return Err(eio());
        }
        self.operations += 1;
        if self.operations == self.crash_at {
            self.crashed = true;
            return Ok(true);
        }
        Ok(false)
    }

    fn change(&mut self, name: &'static str, pending: Pending) -> io::Result<()> {
        let crashing = self.step()?;
        let file = self.files.entry(name).or_default();
        apply(&mut file.current, &pending);
        file.pending.push(pending);
        if crashing {
            return Err(eio());
        }
        Ok(())
    }
}

/// The simulated disk.
#[derive(Default)]
struct Disk {
    state: Mutex<DiskState>,
}

impl Disk {
    fn lock(&self) -> std::sync::MutexGuard<'_, DiskState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn read(&self, name: &'static str, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let state = self.lock();
        if state.crashed {
            return Err(eio());
        }
        let bytes = state.files.get(name).map(|f| f.current.as_slice()).unwrap_or(&[]);
        let end = offset as usize + out.len();
        if end > bytes.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        out.copy_from_slice(&bytes[offset as usize..end]);
        Ok(())
    }

    fn len(&self, name: &'static str) -> io::Result<u64> {
        let state = self.lock();
        if state.crashed {
            return Err(eio());
        }
        Ok(state.files.get(name).map_or(0, |f| f.current.len() as u64))
    }

    fn sync(&self, name: &'static str) -> io::Result<()> {
        let mut state = self.lock();
        if state.step()? {
            return Err(eio());
        }
        let file = state.files.entry(name).or_default();
        for pending in std::mem::take(&mut file.pending) {
            apply(&mut file.durable, &pending);
        }
        Ok(())
    }

    /// The disk as it comes back after the power failed.
    fn after_crash(&self, rng: &mut Rng, survivors: Survivors) -> Arc<Disk> {
        let state = self.lock();
        let mut files = BTreeMap::new();
        for (name, file) in &state.files {
            let mut bytes = file.durable.clone();
            for pending in &file.pending {
                match (survivors, pending) {
                    (Survivors::All, _) => apply(&mut bytes, pending),
                    (Survivors::None, _) => {}
                    (Survivors::Random, Pending::SetLen(_)) => {
                        if rng.coin() {
                            apply(&mut bytes, pending)
                        }
                    }
                    (Survivors::Random, Pending::Write(offset, data)) => {
                        // Each 4 KiB piece lands or not, independently.
                        let mut at = *offset;
                        let end = offset + data.len() as u64;
                        while at < end {
                            let piece_end = ((at / TEAR_BYTES + 1) * TEAR_BYTES).min(end);
                            if rng.coin() {
                                let piece = data[(at - offset) as usize..(piece_end - offset) as usize].to_vec();
                                apply(&mut bytes, &Pending::Write(at, piece));
                            }
                            at = piece_end;
                        }
                    }
                }
            }
            files.insert(*name, SimFile { current: bytes.clone(), durable: bytes, pending: Vec::new() });
        }
        Arc::new(Disk { state: Mutex::new(DiskState { files, ..DiskState::default() }) })
    }
}

/// One file of the simulated disk.
#[derive(Clone)]
struct SimFileHandle {
    disk: Arc<Disk>,
    name: &'static str,
}

impl std::fmt::Debug for SimFileHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimFileHandle({})", self.name)
    }
}

impl redb::StorageBackend for SimFileHandle {
    fn len(&self) -> Result<u64, io::Error> {
        self.disk.len(self.name)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.disk.read(self.name, offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.disk.lock().change(self.name, Pending::SetLen(len))
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.disk.sync(self.name)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.disk.lock().change(self.name, Pending::Write(offset, data.to_vec()))
    }
}

impl LogFile for SimFileHandle {
    fn read_into(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.disk.read(self.name, offset, buf)
    }

    fn write_from(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.disk.lock().change(self.name, Pending::Write(offset, data.to_vec()))
    }

    fn sync(&self) -> io::Result<()> {
        self.disk.sync(self.name)
    }

    fn length(&self) -> io::Result<u64> {
        self.disk.len(self.name)
    }

    fn allocate(&self, size: u64) -> io::Result<()> {
        if self.disk.len(self.name)? < size {
            self.disk.lock().change(self.name, Pending::SetLen(size))?;
        }
        Ok(())
    }
}

/// The two directories of the workload and its names.
const DIRS: [Handle; 2] = [Handle(1), Handle(2)];
const NAMES: usize = 12;

/// What the acknowledged operations have made of the namespace.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    /// (directory index, name) → (handle, mode, symlink target length).
    entries: BTreeMap<(usize, String), (Handle, u32, usize)>,
}

/// One operation of the workload.
#[derive(Clone, Debug)]
enum Op {
    Create { dir: usize, name: String, mode: u32, target: usize },
    Remove { dir: usize, name: String },
    Rename { from: (usize, String), to: (usize, String) },
    Chmod { dir: usize, name: String, mode: u32 },
    Flush,
}

fn name(i: u64) -> String {
    format!("n{i}")
}

impl Model {
    fn pick(&self, rng: &mut Rng) -> Op {
        let existing: Vec<&(usize, String)> = self.entries.keys().collect();
        let roll = rng.below(20);
        if roll == 0 {
            return Op::Flush;
        }
        if existing.is_empty() || roll < 8 {
            for _ in 0..8 {
                let (dir, name) = (rng.below(2) as usize, name(rng.below(NAMES as u64)));
                if !self.entries.contains_key(&(dir, name.clone())) {
                    let mode = 0o600 + rng.below(0o100) as u32;
                    return Op::Create { dir, name, mode, target: 1 + rng.below(3000) as usize };
                }
            }
            return Op::Flush;
        }
        let (dir, name) = existing[rng.below(existing.len() as u64) as usize].clone();
        match roll {
            8..=11 => Op::Remove { dir, name },
            12..=15 => {
                let to = (rng.below(2) as usize, self::name(rng.below(NAMES as u64)));
                if self.entries.contains_key(&to) {
                    Op::Chmod { dir, name, mode: 0o700 }
                } else {
                    Op::Rename { from: (dir, name), to }
                }
            }
            _ => Op::Chmod { dir, name, mode: 0o400 + rng.below(0o100) as u32 },
        }
    }

    /// The model after `op`, given the handle a create allocated.
    fn after(&self, op: &Op, created: Option<Handle>) -> Model {
        let mut next = self.clone();
        match op {
            Op::Create { dir, name, mode, target } => {
                next.entries.insert((*dir, name.clone()), (created.expect("created handle"), *mode, *target));
            }
            Op::Remove { dir, name } => {
                next.entries.remove(&(*dir, name.clone()));
            }
            Op::Rename { from, to } => {
                let entry = next.entries.remove(from).expect("renamed entry");
                next.entries.insert(to.clone(), entry);
            }
            Op::Chmod { dir, name, mode } => {
                next.entries.get_mut(&(*dir, name.clone())).expect("chmod entry").1 = *mode;
            }
            Op::Flush => {}
        }
        next
    }
}

fn directory_record() -> ObjectRecord {
    ObjectRecord::new(ObjectKind::Directory, 0o755, 0, 0, 1)
}

/// The committer operation for `op`; a create reports its handle in `created`.
fn operation(op: &Op, created: Arc<Mutex<Option<Handle>>>) -> Operation {
    let op = op.clone();
    Box::new(move |w, ids| {
        match op {
            Op::Create { dir, name, mode, target } => {
                let d = DIRS[dir];
                let mut parent = w.object(d)?;
                let handle = ids.allocate(w, 0)?;
                let mut record = ObjectRecord::new(ObjectKind::Symlink, mode, 0, 0, 1);
                record.symlink_target = Some("x".repeat(target));
                w.put_object(handle, &record)?;
                w.insert_dirent(d, &name, parent.next_sequence, handle, ObjectKind::Symlink)?;
                parent.next_sequence += 1;
                parent.entry_count += 1;
                w.put_object(d, &parent)?;
                *created.lock().expect("created") = Some(handle);
            }
            Op::Remove { dir, name } => {
                let d = DIRS[dir];
                let (sequence, handle, _) = w.dirent(d, &name)?.ok_or(ErrorCode::NoEntry)?;
                let mut parent = w.object(d)?;
                w.delete_dirent(d, &name, sequence)?;
                w.delete_object(handle)?;
                parent.entry_count -= 1;
                w.put_object(d, &parent)?;
            }
            Op::Rename { from, to } => {
                let (fd, td) = (DIRS[from.0], DIRS[to.0]);
                let (sequence, handle, kind) = w.dirent(fd, &from.1)?.ok_or(ErrorCode::NoEntry)?;
                let mut source = w.object(fd)?;
                w.delete_dirent(fd, &from.1, sequence)?;
                source.entry_count -= 1;
                w.put_object(fd, &source)?;
                let mut target = w.object(td)?;
                w.insert_dirent(td, &to.1, target.next_sequence, handle, kind)?;
                target.next_sequence += 1;
                target.entry_count += 1;
                w.put_object(td, &target)?;
            }
            Op::Chmod { dir, name, mode } => {
                let (_, handle, _) = w.dirent(DIRS[dir], &name)?.ok_or(ErrorCode::NoEntry)?;
                let mut record = w.object(handle)?;
                record.mode = mode;
                w.put_object(handle, &record)?;
            }
            Op::Flush => {}
        }
        Ok(Reply::Done)
    })
}

/// Opens the metadata path on `disk` as a server start does.
fn start(disk: &Arc<Disk>, headroom: &Arc<Headroom>) -> Result<(Arc<Store>, Committer), ErrorCode> {
    let store_file = SimFileHandle { disk: disk.clone(), name: "meta.redb" };
    let store = Arc::new(Store::open_on(move || Ok(store_file.clone()), headroom.clone())?);
    let (wal, batches) = Wal::open_file(Box::new(SimFileHandle { disk: disk.clone(), name: "meta.wal" }), WAL_BYTES)?;
    let committer = Committer::start_on(store.clone(), wal, batches, true, 8)?;
    Ok((store, committer))
}

/// The namespace as the store has it, in model form; checks consistency on the way.
fn observe(store: &Store) -> Result<(Model, BTreeSet<u64>, u64), String> {
    let reader = store.read().map_err(|e| format!("read: {e}"))?;
    let mut model = Model::default();
    for (index, dir) in DIRS.iter().enumerate() {
        let record = reader.object(*dir).map_err(|e| format!("directory {index}: {e}"))?;
        let (entries, end) = reader.dir_page(*dir, 0, 1000).map_err(|e| format!("readdir {index}: {e}"))?;
        if !end || entries.len() as u64 != record.entry_count {
            return Err(format!("directory {index}: {} entries, entry_count {}", entries.len(), record.entry_count));
        }
        for entry in entries {
            if entry.sequence >= record.next_sequence {
                return Err(format!(
                    "entry {} sequence {} ≥ next {}",
                    entry.name, entry.sequence, record.next_sequence
                ));
            }
            let looked = reader.dirent(*dir, &entry.name).map_err(|e| format!("lookup: {e}"))?;
            if looked != Some((entry.handle, entry.kind)) {
                return Err(format!("dirent and readdir row of {} disagree", entry.name));
            }
            let object = reader.object(entry.handle).map_err(|e| format!("object of {}: {e}", entry.name))?;
            let target = object.symlink_target.map_or(0, |t| t.len());
            model.entries.insert((index, entry.name), (entry.handle, object.mode, target));
        }
    }
    let objects: BTreeSet<u64> = reader
        .objects_after(0, 100_000)
        .map_err(|e| format!("objects: {e}"))?
        .into_iter()
        .map(|(handle, _)| handle.0)
        .collect();
    let reserved = reader.counter("object_ids_reserved/0").map_err(|e| format!("counter: {e}"))?;
    Ok((model, objects, reserved))
}

/// What one seed did.
#[derive(Default)]
struct Tally {
    acknowledged: u64,
    in_flight_present: u64,
    in_flight_absent: u64,
}

/// Runs one seed; `Err` describes the invariant it broke.
fn run_seed(seed: u64, headroom: &Arc<Headroom>, runtime: &tokio::runtime::Runtime) -> Result<Tally, String> {
    let mut rng = Rng(seed);
    let survivors = match seed % 3 {
        0 => Survivors::All,
        1 => Survivors::None,
        _ => Survivors::Random,
    };
    let disk = Arc::new(Disk::default());
    let (store, committer) = start(&disk, headroom).map_err(|e| format!("first start: {e}"))?;
    runtime
        .block_on(committer.submit(Box::new(|w, _| {
            w.put_object(DIRS[0], &directory_record())?;
            w.put_object(DIRS[1], &directory_record())?;
            Ok(Reply::Done)
        })))
        .map_err(|e| format!("bootstrap: {e}"))?;
    {
        let mut state = disk.lock();
        state.crash_at = state.operations + 1 + rng.below(OPERATIONS as u64 * 6);
    }
    let mut model = Model::default();
    let mut acknowledged_handles = BTreeSet::new();
    let mut in_flight = None;
    let mut tally = Tally::default();
    for _ in 0..OPERATIONS {
        let op = model.pick(&mut rng);
        let created = Arc::new(Mutex::new(None));
        let crashed_before = disk.lock().crashed;
        let answer = match op {
            Op::Flush => runtime.block_on(committer.flush()),
            _ => runtime.block_on(committer.submit(operation(&op, created.clone()))),
        };
        let handle = *created.lock().expect("created");
        match answer {
            Ok(_) => {
                // (Also when the power failed after the change was durable, e.g. while emptying the log.)
                model = model.after(&op, handle);
                acknowledged_handles.extend(handle);
                tally.acknowledged += 1;
            }
            Err(_) if crashed_before => break,
            Err(_) if disk.lock().crashed => {
                in_flight = Some((op, handle));
                break;
            }
            Err(code) => return Err(format!("{op:?} failed before the crash: {code}")),
        }
    }
    // The power fails now if it has not yet.
    disk.lock().crashed = true;
    drop(committer);
    drop(store);
    let disk = disk.after_crash(&mut rng, survivors);
    let (store, committer) = start(&disk, headroom).map_err(|e| format!("restart: {e}"))?;
    let (found, objects, reserved) = observe(&store)?;
    let with_in_flight = in_flight.as_ref().map(|(op, handle)| model.after(op, *handle));
    let expected = if found == model {
        tally.in_flight_absent += 1;
        model
    } else if Some(&found) == with_in_flight.as_ref() {
        tally.in_flight_present += 1;
        acknowledged_handles.extend(in_flight.as_ref().and_then(|(_, handle)| *handle));
        found.clone()
    } else {
        return Err(format!("recovered namespace\n{found:?}\nis neither the acknowledged one\n{model:?}\nnor that plus the operation in flight {in_flight:?}"));
    };
    // Nothing removed comes back: the objects are exactly the model's.
    let mut wanted: BTreeSet<u64> = expected.entries.values().map(|(handle, _, _)| handle.0).collect();
    wanted.extend(DIRS.iter().map(|d| d.0));
    if objects != wanted {
        return Err(format!("objects {objects:?}, expected {wanted:?}"));
    }
    if let Some(above) = objects.iter().find(|h| Handle(**h).object_id() >= reserved && !DIRS.contains(&Handle(**h))) {
        return Err(format!("object {above:#x} not below the reservation {reserved}"));
    }
    // Ids are never reused: a new create gets an id never acknowledged.
    let created = Arc::new(Mutex::new(None));
    let op = Op::Create { dir: 0, name: "after-crash".into(), mode: 0o600, target: 1 };
    runtime.block_on(committer.submit(operation(&op, created.clone()))).map_err(|e| format!("create after: {e}"))?;
    let handle = created.lock().expect("created").expect("a handle");
    if acknowledged_handles.contains(&handle) {
        return Err(format!("handle {handle:?} issued twice"));
    }
    Ok(tally)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn crash_at_any_write_or_sync_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(dir.path().join("headroom")).unwrap();
    let headroom = Arc::new(Headroom::new(file, dir.path(), 0));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (start, count) = (env_u64("WEFT_CRASH_SEED_START", 0), env_u64("WEFT_CRASH_SEEDS", 2000));
    let mut total = Tally::default();
    for seed in start..start + count {
        match run_seed(seed, &headroom, &runtime) {
            Ok(tally) => {
                total.acknowledged += tally.acknowledged;
                total.in_flight_present += tally.in_flight_present;
                total.in_flight_absent += tally.in_flight_absent;
            }
            Err(why) => panic!("seed {seed}: {why}"),
        }
    }
    eprintln!(
        "crash simulation: {count} seeds from {start}, {} acknowledged operations, in-flight operation present \
         after recovery {} times, absent {} times",
        total.acknowledged, total.in_flight_present, total.in_flight_absent
    );
}
