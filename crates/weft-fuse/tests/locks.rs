//! fcntl record locks through real mounts: processes on two mounts of one
//! cluster (and two processes on one mount) exclude each other; locks
//! split, merge and upgrade per owner; close and exit release them;
//! `F_GETLK` reports conflicts; a waiting `F_SETLKW` keeps the mount
//! serving, and ends on a signal or when its process is killed.
//!
//! Each locking process is a small python3 program calling fcntl(2) on one
//! open descriptor, driven line by line from the test ([`Agent`]).

mod common;

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

const AGENT: &str = r#"
import os, sys, fcntl, struct, signal, errno, threading
# Hang guard: the whole process ends after 120 s, even while blocked in fcntl.
guard = threading.Timer(120, os._exit, [3])
guard.daemon = True
guard.start()
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
print(os.getpid(), flush=True)
T = {'W': fcntl.F_WRLCK, 'R': fcntl.F_RDLCK, 'U': fcntl.F_UNLCK}
N = {v: k for k, v in T.items()}
class Alarm(Exception):
    pass
def on_alarm(*_):
    raise Alarm()
signal.signal(signal.SIGALRM, on_alarm)
def flock(t, start, length):
    return struct.pack('hhqqi4x', T[t], os.SEEK_SET, start, length, 0)
for line in sys.stdin:
    word = line.split()
    cmd = word[0]
    try:
        if cmd in ('set', 'wait', 'alarm-wait'):
            if cmd == 'alarm-wait':
                signal.alarm(int(word[4]))
            op = fcntl.F_SETLK if cmd == 'set' else fcntl.F_SETLKW
            fcntl.fcntl(fd, op, flock(word[1], int(word[2]), int(word[3])))
            signal.alarm(0)
            out = 'ok'
        elif cmd == 'get':
            t, _, s, l, p = struct.unpack('hhqqi4x', fcntl.fcntl(fd, fcntl.F_GETLK, flock(word[1], int(word[2]), int(word[3]))))
            out = 'unlocked' if t == fcntl.F_UNLCK else f'{N[t]} {s} {l} {p}'
        elif cmd == 'close':
            os.close(fd)
            fd = os.open(path, os.O_RDWR)
            out = 'ok'
        elif cmd == 'exit':
            os._exit(0)
    except Alarm:
        out = 'interrupted'
    except OSError as e:
        out = errno.errorcode[e.errno]
    print(out, flush=True)
"#;

/// A python3 process holding one descriptor of a file, taking fcntl locks
/// on command; killed on drop.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    pid: u32,
}

impl Agent {
    fn start(path: &std::path::Path) -> Agent {
        let mut child = Command::new("python3")
            .args(["-c", AGENT])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let stdin = child.stdin.take().expect("stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let pid: u32 = lines.next().expect("the agent's pid").expect("a line").trim().parse().expect("a pid");
        assert_eq!(pid, child.id());
        Agent { child, stdin, lines, pid }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("to the agent");
    }

    fn answer(&mut self) -> String {
        self.lines.next().expect("an answer").expect("a line")
    }

    fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.answer()
    }

    /// Waits (bounded) for the process to end; whether it did.
    fn ended_within(&mut self, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn fcntl_locks_exclude_across_mounts_and_release_at_close() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let first = Mount::start(&cluster, &[]);
    let second = Mount::start(&cluster, &[]);
    let (a, b) = (first.at("f"), second.at("f"));
    ok(&format!("echo data > {}", q(&a)));
    let mut a1 = Agent::start(&a);
    let mut a2 = Agent::start(&a);
    let mut b1 = Agent::start(&b);

    assert_eq!(a1.ask("set W 0 100"), "ok");
    assert_eq!(b1.ask("set W 50 10"), "EAGAIN", "another mount");
    assert_eq!(a2.ask("set R 0 1"), "EAGAIN", "another process on the same mount");
    assert_eq!(b1.ask("set R 100 100"), "ok", "adjacent bytes are free");
    // F_GETLK: a holder on another mount is its first conflicting byte, pid 0;
    // one on this mount is exact, with its pid. The asker's own locks never conflict.
    assert_eq!(b1.ask("get W 0 300"), "W 0 1 0");
    assert_eq!(a2.ask("get W 0 300"), format!("W 0 100 {}", a1.pid));
    assert_eq!(a2.ask("get R 100 100"), "unlocked");
    assert_eq!(a2.ask("get W 150 1"), "R 150 1 0");
    assert_eq!(b1.ask("get W 100 100"), "unlocked", "its own lock");

    // F_SETLKW waits without holding up the mount's other requests...
    b1.send("wait W 50 10");
    assert_eq!(ok(&format!("cat {}", q(&b))), "data\n");
    ok(&format!("ls {} >/dev/null && touch {}", q(&second.path), q(&second.at("other"))));
    // ...and is granted when a partial unlock splits the holder's lock.
    assert_eq!(a1.ask("set U 40 30"), "ok");
    assert_eq!(b1.answer(), "ok");
    assert_eq!(a2.ask("set W 39 1"), "EAGAIN", "a1 keeps 0..40");
    assert_eq!(a2.ask("set W 70 1"), "EAGAIN", "a1 keeps 70..100");
    assert_eq!(a2.ask("set W 55 1"), "EAGAIN", "b1 holds 50..60");
    assert_eq!(a2.ask("set W 45 1"), "ok", "freed by the split");

    // An upgrade refused leaves the read lock as it was.
    assert_eq!(a2.ask("set R 150 1"), "ok", "readers share");
    assert_eq!(b1.ask("set W 100 100"), "EAGAIN", "a2 reads byte 150");
    assert_eq!(a1.ask("set W 120 1"), "EAGAIN", "b1 still reads 100..200");
    // Merge: two adjacent write locks of one owner become one, released by one unlock.
    assert_eq!(b1.ask("set W 60 10"), "ok");
    assert_eq!(a2.ask("get W 50 20"), "W 50 1 0");
    assert_eq!(b1.ask("set U 50 20"), "ok");
    assert_eq!(a2.ask("set W 50 20"), "ok");
    assert_eq!(a2.ask("set U 50 20"), "ok");

    // Any close of the file releases the closing process's locks.
    assert_eq!(a1.ask("close"), "ok");
    assert_eq!(b1.ask("set W 0 40"), "ok");
    // So does exit (here without unlocking anything).
    b1.send("exit");
    assert!(b1.ended_within(Duration::from_secs(60)));
    assert_eq!(a2.ask("set W 0 100"), "ok", "b1's locks went with it");
    assert_eq!(a2.ask("set W 100 100"), "ok", "its own read lock at 150 is upgraded");
}

#[test]
fn waiting_setlkw_ends_on_a_signal_and_when_killed() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let first = Mount::start(&cluster, &[]);
    let second = Mount::start(&cluster, &[]);
    let (a, b) = (first.at("f"), second.at("f"));
    ok(&format!("echo data > {}", q(&a)));
    let mut holder = Agent::start(&a);
    // A whole-file lock (length 0: to the end of any file).
    assert_eq!(holder.ask("set W 0 0"), "ok");

    let mut waiter = Agent::start(&b);
    assert_eq!(waiter.ask("get R 1000000000 1"), "W 1000000000 1 0");
    assert_eq!(waiter.ask("alarm-wait W 10 1 1"), "interrupted", "SIGALRM ends the wait");
    assert_eq!(waiter.ask("set W 10 1"), "EAGAIN", "still held");

    // A process killed while it waits dies (it is not stuck in the kernel).
    let mut doomed = Agent::start(&b);
    doomed.send("wait W 0 1");
    std::thread::sleep(Duration::from_millis(300)); // let it reach the wait (no assertion rests on it)
    let _ = doomed.child.kill();
    assert!(doomed.ended_within(Duration::from_secs(60)), "a waiting F_SETLKW could not be killed");

    // The queued requests of both are gone: once the holder unlocks, the lock is free.
    assert_eq!(holder.ask("set U 0 0"), "ok");
    assert_eq!(waiter.ask("set W 0 0"), "ok");
    assert_eq!(holder.ask("get R 5 1"), "W 5 1 0");
    // And a blocked wait is granted when the holder's process exits.
    holder.send("wait R 0 0");
    waiter.send("exit");
    assert!(waiter.ended_within(Duration::from_secs(60)));
    assert_eq!(holder.answer(), "ok");
}
