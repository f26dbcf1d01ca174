//! Real mounts of a real cluster: coreutils, tar, scripts, two mounts,
//! fio, errno values, a killed server, daemon mode and auto-unmount.
//!
//! Every mount is a child process (`weft-fuse-mount`, with
//! `PR_SET_PDEATHSIG`) owned by a [`Mount`] guard that unmounts and kills it
//! on drop, also when the test fails; servers belong to a testkit
//! `Cluster`, declared first so it is dropped last. Tests take a lock and
//! run one at a time: the machine has two cores.
//!
//! Nothing here asserts on wall-clock time. Commands that could hang run
//! under `timeout 120` only as a guard against a hung test.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_testkit::{Cluster, ClusterOptions};

mod common;

use common::*;

#[test]
fn coreutils_end_to_end() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster, &[]);
    let local = tempfile::tempdir().unwrap();
    let (m, l) = (q(&mount.path), q(local.path()));

    ok(&format!("head -c 5000000 /dev/urandom > {l}/src"));
    ok(&format!("cp {l}/src {m}/a && cmp {l}/src {m}/a"));
    ok(&format!("cat {m}/a > {l}/back && cmp {l}/src {l}/back"));
    ok(&format!("mkdir -p {m}/d1/d2/d3 && test -d {m}/d1/d2/d3"));
    ok(&format!("mv {m}/a {m}/d1/d2/b && test ! -e {m}/a && cmp {l}/src {m}/d1/d2/b"));
    let listing = ok(&format!("ls -l {m}/d1/d2"));
    assert!(listing.contains(" b\n") && listing.contains("5000000"), "{listing}");
    ok(&format!("ln -s d1/d2/b {m}/link && cmp {l}/src {m}/link"));
    assert_eq!(ok(&format!("readlink {m}/link")).trim(), "d1/d2/b");
    assert_eq!(ok(&format!("stat -c %s {m}/d1/d2/b")).trim(), "5000000");
    assert_eq!(ok(&format!("stat -L -c %F {m}/link")).trim(), "regular file");

    // truncate: shrink, then extend (zeros), mirrored locally.
    ok(&format!("truncate -s 1000 {m}/d1/d2/b && truncate -s 1000 {l}/src && cmp {l}/src {m}/d1/d2/b"));
    ok(&format!("truncate -s 3000000 {m}/d1/d2/b && truncate -s 3000000 {l}/src && cmp {l}/src {m}/d1/d2/b"));
    assert_eq!(ok(&format!("stat -c %s {m}/d1/d2/b")).trim(), "3000000");

    // dd into the middle without truncating, and with odd block sizes.
    ok(&format!("head -c 700000 /dev/urandom > {l}/patch"));
    ok(&format!("dd if={l}/patch of={m}/d1/d2/b bs=7000 seek=13 conv=notrunc status=none"));
    ok(&format!("dd if={l}/patch of={l}/src bs=7000 seek=13 conv=notrunc status=none"));
    ok(&format!("cmp {l}/src {m}/d1/d2/b"));
    ok(&format!("dd if={m}/d1/d2/b of={l}/dd-back bs=1M status=none && cmp {l}/src {l}/dd-back"));

    // Appends (O_APPEND) land at the end.
    ok(&format!("printf one > {m}/log && printf two >> {m}/log && printf three >> {m}/log"));
    assert_eq!(ok(&format!("cat {m}/log")), "onetwothree");

    // chmod and utimes.
    ok(&format!("chmod 640 {m}/log"));
    assert_eq!(ok(&format!("stat -c %a {m}/log")).trim(), "640");
    // utimens. On an empty file: weft-client reports a file's mtime as the
    // newest of its metafile's and its datafiles' (see the crate README).
    ok(&format!("touch {m}/empty && touch -d @1500000000 {m}/empty"));
    assert_eq!(ok(&format!("stat -c %Y {m}/empty")).trim(), "1500000000");

    // A listing longer than one page.
    ok(&format!("mkdir {m}/many && for i in $(seq 1 300); do : > {m}/many/f$i; done"));
    assert_eq!(ok(&format!("ls {m}/many | wc -l")).trim(), "300");
    assert_eq!(ok(&format!("ls -a {m}/many | wc -l")).trim(), "302");
    assert_eq!(ok(&format!("find {m}/many -type f | wc -l")).trim(), "300");

    // A shell script and a copied binary run from the mount.
    ok(&format!("printf '#!/bin/sh\\necho hello-from-weft \"$1\"\\n' > {m}/s.sh && chmod +x {m}/s.sh"));
    assert_eq!(ok(&format!("{m}/s.sh there")).trim(), "hello-from-weft there");
    ok(&format!("cp /bin/echo {m}/echo && chmod 755 {m}/echo"));
    assert_eq!(ok(&format!("{m}/echo binary-ran")).trim(), "binary-ran");

    // Shared mmap: write through a mapping, then read with plain reads.
    let script = format!(
        "import mmap, os\np = {m} + '/mapped'\nfd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)\nos.ftruncate(fd, 1 << 20)\n\
         mm = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED)\nfor i in range(0, 1 << 20, 4096): mm[i:i+4] = (i // 4096).to_bytes(4, 'little')\n\
         mm.flush(); mm.close(); os.close(fd)\ndata = open(p, 'rb').read()\nassert len(data) == 1 << 20\n\
         assert all(data[i:i+4] == (i // 4096).to_bytes(4, 'little') for i in range(0, 1 << 20, 4096))\nprint('mmap ok')"
    );
    assert_eq!(ok(&format!("python3 -c \"{}\"", script.replace('"', "\\\""))).trim(), "mmap ok");

    // statfs.
    ok(&format!("df {m} >/dev/null && stat -f {m} >/dev/null"));

    // rm -r of the tree.
    ok(&format!("rm -r {m}/d1 {m}/many && test ! -e {m}/d1"));
    let rest = ok(&format!("ls -A {m}"));
    assert!(!rest.contains("d1") && !rest.contains("many"), "{rest}");
}

#[test]
fn tar_tree_and_diff() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster, &[]);
    let local = tempfile::tempdir().unwrap();
    let (m, l) = (q(&mount.path), q(local.path()));
    // A snapshot first: other work may change the repository meanwhile.
    let root = weft_testkit::workspace_root();
    ok(&format!("tar -C {} --exclude=target -cf {l}/tree.tar crates", q(&root)));
    ok(&format!("mkdir {l}/here && tar -C {l}/here -xf {l}/tree.tar"));
    ok(&format!("tar -C {m} -xf {l}/tree.tar"));
    ok(&format!("diff -r {l}/here/crates {m}/crates"));
    // And back out through the read path.
    ok(&format!("mkdir {l}/back && tar -C {m} -cf - crates | tar -C {l}/back -xf -"));
    ok(&format!("diff -r {l}/here/crates {l}/back/crates"));
}

#[test]
fn two_mounts_see_each_other_after_close() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let first = Mount::start(&cluster, &[]);
    let second = Mount::start(&cluster, &[]);
    let (a, b) = (q(&first.path), q(&second.path));

    ok(&format!("echo version-one > {a}/f"));
    assert_eq!(ok(&format!("cat {b}/f")), "version-one\n");
    // Rewritten larger by the other mount.
    ok(&format!("head -c 300000 /dev/urandom > {b}/f"));
    ok(&format!("cmp {a}/f {b}/f"));
    assert_eq!(ok(&format!("stat -c %s {a}/f")).trim(), "300000");
    // Truncated and rewritten shorter by the other mount, after this one read it.
    ok(&format!("cat {a}/f > /dev/null"));
    ok(&format!("truncate -s 0 {b}/f && printf short > {b}/f"));
    assert_eq!(ok(&format!("cat {a}/f")), "short");
    assert_eq!(ok(&format!("stat -c %s {a}/f")).trim(), "5");
    // Same size, new contents (cached pages must not be reused).
    ok(&format!("printf AAAAAAAA > {a}/g && cat {b}/g >/dev/null && cat {a}/g >/dev/null"));
    ok(&format!("printf BBBBBBBB | dd of={b}/g conv=notrunc status=none"));
    assert_eq!(ok(&format!("cat {a}/g")), "BBBBBBBB");
    // Replaced by a new file of the same name.
    ok(&format!("rm {b}/g && echo replaced > {b}/g"));
    assert_eq!(ok(&format!("cat {a}/g")), "replaced\n");
    // Directories and removal.
    ok(&format!("mkdir {a}/dir && echo x > {a}/dir/x"));
    assert_eq!(ok(&format!("cat {b}/dir/x")), "x\n");
    ok(&format!("rm -r {b}/dir"));
    ok(&format!("test ! -e {b}/dir"));
    ok(&format!("for i in $(seq 1 50); do test -e {a}/dir/x || exit 0; sleep 0.1; done; exit 1"));
}

/// Close-to-open with attributes cached: mount B has cached a file's
/// attributes (a `stat`, kept for ten minutes), mount A appends and
/// closes, and B's next open sees the new length and bytes exactly, while
/// a plain `stat` in B may still answer from its cache. Names are never
/// cached as absent: a name B found missing is there as soon as A creates it.
#[test]
fn cached_attributes_stay_close_to_open() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let first = Mount::start(&cluster, &[]);
    let second = Mount::start(&cluster, &["--attr-ttl-ms", "600000", "--entry-ttl-ms", "600000"]);
    let (a, b) = (q(&first.path), q(&second.path));

    ok(&format!("printf first > {a}/f"));
    assert_eq!(ok(&format!("stat -c %s {b}/f")).trim(), "5");
    ok(&format!("printf -- -and-appended >> {a}/f"));
    // The cached attributes stand until B opens the file...
    assert_eq!(ok(&format!("stat -c %s {b}/f")).trim(), "5", "attributes were not cached");
    // ...and the open sees the new size (fstat) and bytes (read).
    let script = format!(
        "import os\nfd = os.open({b} + '/f', os.O_RDONLY)\nsize = os.fstat(fd).st_size\n\
         data = os.read(fd, 1 << 16)\nos.close(fd)\nprint(size, data.decode())"
    );
    assert_eq!(ok(&format!("python3 -c \"{}\"", script.replace('"', "\\\""))).trim(), "18 first-and-appended");
    assert_eq!(ok(&format!("stat -c %s {b}/f")).trim(), "18");
    assert_eq!(ok(&format!("cat {b}/f")), "first-and-appended");

    // Shrunk and rewritten by A after B cached it: B's open reads exactly.
    ok(&format!("cat {b}/f > /dev/null && printf xyz > {a}/f"));
    assert_eq!(ok(&format!("cat {b}/f")), "xyz");
    assert_eq!(ok(&format!("stat -c %s {b}/f")).trim(), "3");

    // No negative entries: B misses a name, A creates it, B sees it at once.
    ok(&format!("test ! -e {b}/late"));
    ok(&format!("echo here > {a}/late"));
    assert_eq!(ok(&format!("cat {b}/late")), "here\n");
}

/// Requests one call costs through the mount, from the mount's counters.
fn requests_of(mount: &mut Mount, script: &str) -> BTreeMap<String, u64> {
    let before = mount.counters();
    ok(script);
    let after = mount.counters();
    after
        .into_iter()
        .map(|(kind, n)| (kind.clone(), n - before.get(&kind).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Creating a file through the mount is one request (`create_file`, whose
/// reply carries the attributes), after the kernel's lookup of the missing
/// name (one `stat_entry`); an exclusive create of an existing name is one
/// request too, answered EEXIST.
#[test]
fn create_is_one_request() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    // Names and attributes stay cached for the whole test, so the path
    // walk to `d` costs nothing and only the create is counted. (With
    // attributes not cached at all, the kernel's permission check of the
    // opened file would add a stat.)
    let mut mount = Mount::start(&cluster, &["--entry-ttl-ms", "600000", "--attr-ttl-ms", "600000"]);
    let m = mount.path.display().to_string();
    ok(&format!("mkdir {m}/d && ls {m}/d"));
    let create = format!("python3 -c \"import os; os.close(os.open('{m}/d/new', os.O_CREAT | os.O_WRONLY, 0o640))\"");
    let cost = requests_of(&mut mount, &create);
    let expected: BTreeMap<String, u64> =
        [("requests", 2), ("stat_entry", 1), ("create_file", 1)].map(|(k, n)| (k.to_string(), n)).into();
    assert_eq!(cost, expected, "open(O_CREAT) of a new file");
    assert_eq!(ok(&format!("stat -c '%a %s' {m}/d/new")).trim(), "640 0");
    assert_eq!(errno_of(None, &format!("os.open('{m}/d/new', os.O_CREAT | os.O_EXCL | os.O_WRONLY)")), "EEXIST");
}

/// The opt-in write-back cache: small, partial-page and write-only
/// writes buffered by the kernel reach the servers by close, byte for byte
/// as another mount reads them; a write after a server died still
/// succeeds (it only dirties pages), and the error surfaces at `fsync`.
#[test]
fn writeback_cache_writes_and_reports_errors_at_fsync() {
    let _serial = serial();
    let mut cluster = Cluster::start(ClusterOptions::default());
    // Attributes cached for the whole test: a buffered write refreshes
    // expired ones first (a stat, which would meet the dead server).
    let args = ["--writeback-cache", "--attr-ttl-ms", "600000", "--request-timeout-ms", "3000"];
    let cached = Mount::start(&cluster, &args);
    let plain = Mount::start(&cluster, &[]);
    let local = tempfile::tempdir().unwrap();
    let (w, r, l) = (q(&cached.path), q(&plain.path), q(local.path()));

    ok(&format!("head -c 3000000 /dev/urandom > {l}/src && head -c 70000 /dev/urandom > {l}/patch"));
    // 4 KiB and 8 KiB writes, then write-only opens patching partial pages
    // (the kernel reads the rest of each page through the write-only open).
    ok(&format!("dd if={l}/src of={w}/f bs=4096 status=none && dd if={l}/patch of={w}/f bs=8192 seek=50 conv=notrunc status=none"));
    ok(&format!("dd if={l}/patch of={l}/src bs=8192 seek=50 conv=notrunc status=none"));
    for (block, seek) in [(100, 777), (3000, 333), (1, 2_999_999)] {
        let dd = |target: &str| {
            format!("dd if={l}/patch of={target} bs={block} seek={seek} count=7 conv=notrunc status=none")
        };
        ok(&format!("{} && {}", dd(&format!("{w}/f")), dd(&format!("{l}/src"))));
    }
    ok(&format!("cmp {l}/src {r}/f"));
    assert_eq!(ok(&format!("stat -c %s {r}/f")).trim(), ok(&format!("stat -c %s {l}/src")).trim());
    ok(&format!("cmp {l}/src {w}/f"));

    // Errors at fsync: write (buffered), kill a server holding a strip of
    // the file, write again (still only pages), then fsync.
    let script = format!(
        "import os, sys, errno\nfd = os.open({w} + '/g', os.O_WRONLY | os.O_CREAT, 0o644)\n\
         os.write(fd, b'a' * (1 << 20))\nprint('written', flush=True)\nsys.stdin.readline()\n\
         os.write(fd, b'b' * (1 << 20))\nprint('second write ok', flush=True)\n\
         try:\n    os.fsync(fd)\n    print('fsync ok')\nexcept OSError as e:\n    print('fsync', errno.errorcode[e.errno])\n\
         try:\n    os.close(fd)\nexcept OSError:\n    pass\n"
    );
    let mut writer = Command::new("timeout")
        .args(["120", "python3", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut lines = std::io::BufReader::new(writer.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().expect("a line").unwrap(), "written");
    cluster.kill(2); // every server holds one 64 KiB strip of each MiB
    writeln!(writer.stdin.take().unwrap(), "go").unwrap();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(writer.wait().unwrap().success());
    assert_eq!(rest, ["second write ok", "fsync EIO"]);
}

#[test]
fn fio_write_verify() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster, &[]);
    let m = q(&mount.path);
    // verify_state_save=0: fio would otherwise drop state files in the working directory.
    let common = "--ioengine=psync --fallocate=none --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --output-format=terse";
    ok(&format!("fio --name=seq --filename={m}/seq --rw=write --bs=1M --size=32M {common}"));
    ok(&format!("fio --name=rand --directory={m} --rw=randwrite --bs=16k --size=8M --numjobs=2 {common}"));
    ok(&format!("fio --name=rr --filename={m}/seq --rw=randread --bs=64k --size=32M --numjobs=2 --io_size=8M --ioengine=psync --output-format=terse"));
}

/// Runs a python snippet (as `uid` if given) that prints errno names.
fn errno_of(uid: Option<u32>, statement: &str) -> String {
    let code = format!(
        "import os, errno, fcntl\ntry:\n    {statement}\n    print('OK')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"
    );
    let mut command = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".to_string(),
                "/usr/bin/python3".to_string(),
            ]);
            c
        }
        None => Command::new("/usr/bin/python3"),
    };
    let out = command.arg("-c").arg(code).output().expect("python3");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn errors_reach_callers() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster, &[]);
    let m = mount.path.display().to_string();
    ok(&format!("mkdir {m}/full {m}/empty && echo x > {m}/full/x && echo y > {m}/file && chmod 600 {m}/file"));
    ok(&format!("mkdir {m}/open && chmod 777 {m}/open"));
    let cases: Vec<(Option<u32>, String, &str)> = vec![
        (None, format!("os.stat('{m}/missing')"), "ENOENT"),
        (None, format!("open('{m}/missing/x')"), "ENOENT"),
        (None, format!("os.mkdir('{m}/full')"), "EEXIST"),
        (None, format!("os.open('{m}/file', os.O_CREAT | os.O_EXCL | os.O_WRONLY)"), "EEXIST"),
        (None, format!("os.rmdir('{m}/full')"), "ENOTEMPTY"),
        (None, format!("os.rename('{m}/empty', '{m}/full')"), "ENOTEMPTY"),
        (None, format!("os.open('{m}/full', os.O_WRONLY)"), "EISDIR"),
        (None, format!("os.unlink('{m}/full')"), "EISDIR"),
        (None, format!("os.listdir('{m}/file')"), "ENOTDIR"),
        (None, format!("os.stat('{m}/file/x')"), "ENOTDIR"),
        (None, format!("os.rmdir('{m}/file')"), "ENOTDIR"),
        (Some(1000), format!("open('{m}/file')"), "EACCES"),
        (Some(1000), format!("os.mkdir('{m}/full/sub')"), "EACCES"),
        (Some(1000), format!("os.unlink('{m}/full/x')"), "EACCES"),
        (Some(1000), format!("os.open('{m}/open/mine', os.O_CREAT | os.O_WRONLY, 0o600)"), "OK"),
        (Some(1000), format!("os.chmod('{m}/file', 0o777)"), "EPERM"),
        // Unsupported calls (see README): hard links, xattrs
        // (EOPNOTSUPP, which Python names ENOTSUP: the same number on Linux), locks.
        (None, format!("os.link('{m}/file', '{m}/hard')"), "EPERM"),
        (None, format!("os.mkfifo('{m}/file')"), "EEXIST"),
        // The mount is nodev: a device node is created, never opened as a device.
        (None, format!("os.mknod('{m}/null', 0o666 | 0o20000, os.makedev(1, 3))"), "OK"),
        (None, format!("open('{m}/null', 'rb')"), "EACCES"),
        // A non-owner's write and truncate clear setuid/setgid and proceed
        // (through the page cache; an O_APPEND handle is direct I/O, where the
        // kernel asks nothing without FUSE_HANDLE_KILLPRIV_V2: not yet done).
        (None, format!("open('{m}/suid', 'w').close(); os.chmod('{m}/suid', 0o6777)"), "OK"),
        (Some(1000), format!("f = open('{m}/suid', 'r+'); f.write('x'); f.close()"), "OK"),
        (
            None,
            format!("assert oct(os.stat('{m}/suid').st_mode & 0o7777) == '0o777', oct(os.stat('{m}/suid').st_mode)"),
            "OK",
        ),
        (None, format!("os.chmod('{m}/suid', 0o4777)"), "OK"),
        (Some(1000), format!("os.truncate('{m}/suid', 0)"), "OK"),
        (
            None,
            format!("assert oct(os.stat('{m}/suid').st_mode & 0o7777) == '0o777', oct(os.stat('{m}/suid').st_mode)"),
            "OK",
        ),
        // ... but a non-owner still may not change other bits.
        (Some(1000), format!("os.chmod('{m}/suid', 0o700)"), "EPERM"),
        // chown clears setuid, and setgid with group-execute.
        (None, format!("os.chmod('{m}/suid', 0o6755); os.chown('{m}/suid', 1000, 1000)"), "OK"),
        (
            None,
            format!("assert oct(os.stat('{m}/suid').st_mode & 0o7777) == '0o755', oct(os.stat('{m}/suid').st_mode)"),
            "OK",
        ),
        (None, format!("os.setxattr('{m}/file', 'user.a', b'1')"), "ENOTSUP"),
        (None, format!("os.getxattr('{m}/file', 'user.a')"), "ENOTSUP"),
        (None, format!("fcntl.lockf(os.open('{m}/file', os.O_RDWR), fcntl.LOCK_EX)"), "OK"),
        (None, format!("fcntl.lockf(os.open('{m}/file', os.O_RDONLY), fcntl.LOCK_EX)"), "EBADF"),
    ];
    let mut failures = Vec::new();
    for (uid, statement, expected) in &cases {
        let got = errno_of(*uid, statement);
        if got != *expected {
            failures.push(format!("{statement} (uid {uid:?}): expected {expected}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The file uid 1000 created is theirs.
    assert_eq!(ok(&format!("stat -c %u {m}/open/mine")).trim(), "1000");
}

/// Runs `weft fsck` on the cluster and asserts it found nothing.
fn assert_fsck_clean(cluster: &Cluster) {
    let fsck = Command::new(weft_testkit::weft_bin())
        .args(["fsck", "--config"])
        .arg(&cluster.config_path)
        .output()
        .expect("run weft fsck");
    let report = String::from_utf8_lossy(&fsck.stdout);
    assert!(fsck.status.success() && report.contains("problems: 0 "), "fsck: {report}");
}

#[test]
fn special_files_fifo_device_socket() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster, &[]);
    let m = mount.path.display().to_string();
    // A FIFO: a writer and a reader through it, the bytes pass in order.
    ok(&format!("mkfifo -m 640 {m}/pipe"));
    assert_eq!(ok(&format!("stat -c '%F %a' {m}/pipe")).trim(), "fifo 640");
    let out = ok(&format!("(seq 1 1000 > {m}/pipe &) ; cat {m}/pipe | sha256sum"));
    let expected = ok("seq 1 1000 | sha256sum");
    assert_eq!(out, expected);
    // Character and block device nodes keep their device numbers.
    ok(&format!("mknod -m 600 {m}/chr c 10 200 && mknod {m}/blk b 7 3"));
    assert_eq!(ok(&format!("stat -c '%F %a %t %T' {m}/chr")).trim(), "character special file 600 a c8");
    assert_eq!(ok(&format!("stat -c '%F %t %T' {m}/blk")).trim(), "block special file 7 3");
    // A UNIX socket bound on the mount: a client connects through its name.
    let script = format!(
        "import socket, os\np = '{m}/sock'\ns = socket.socket(socket.AF_UNIX)\ns.bind(p)\ns.listen(1)\n\
         c = socket.socket(socket.AF_UNIX)\nc.connect(p)\na, _ = s.accept()\nc.sendall(b'ping')\n\
         print(a.recv(4).decode(), oct(os.stat(p).st_mode >> 12))"
    );
    let out = Command::new("timeout").args(["60", "/usr/bin/python3", "-c", &script]).output().expect("python3");
    assert!(out.status.success(), "socket: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ping 0o14");
    // Listed with their types; removed like files.
    assert_eq!(ok(&format!("find {m} -mindepth 1 -printf '%y %f\\n' | sort")), "b blk\nc chr\np pipe\ns sock\n");
    ok(&format!("rm {m}/pipe {m}/chr {m}/blk {m}/sock"));
    assert_eq!(ok(&format!("ls -A {m}")), "");
    drop(mount);
    assert_fsck_clean(&cluster);
}

/// The server holding a handle (inode number), from the cluster's configuration.
fn server_of_inode(cluster: &Cluster, ino: u64) -> u32 {
    cluster.config.server_of_handle(weft_proto::Handle(ino)).expect("routable inode")
}

#[test]
fn killed_server_fails_with_eio_then_recovers() {
    let _serial = serial();
    let mut cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster, &["--request-timeout-ms", "3000"]);
    let m = q(&mount.path);
    ok(&format!("head -c 1000000 /dev/urandom > {m}/striped && cp {m}/striped {m}/../striped.copy"));
    ok(&format!("for i in $(seq 0 7); do mkdir {m}/d$i; done"));
    let victim = 3;
    let live = (0..8)
        .find(|i| server_of_inode(&cluster, std::fs::metadata(mount.at(&format!("d{i}"))).unwrap().ino()) != victim)
        .expect("a directory on a live server");
    let live_dir = mount.at(&format!("d{live}"));
    cluster.kill(victim);

    // Touching the dead server: EIO, bounded by the request timeout.
    let read = bash(&format!("cat {m}/striped > /dev/null"));
    assert!(!read.status.success());
    assert_ne!(read.status.code(), Some(124), "cat hung");
    assert!(String::from_utf8_lossy(&read.stderr).contains("Input/output error"), "{:?}", read);
    let create = bash(&format!("echo new > {}/new-file", q(&live_dir)));
    assert_ne!(create.status.code(), Some(124), "create hung");
    // Aggregate create skips a data server known to be down (its peers see
    // its connections close), so the file is striped over the live ones;
    // the client-driven path fails instead. Either way no file may be
    // striped over the dead server.
    if create.status.success() {
        ok(&format!("cat {}/new-file > /dev/null", q(&live_dir)));
    }
    // Not touching it: still works.
    ok(&format!("stat {} > /dev/null && ls {} > /dev/null", q(&live_dir), q(&live_dir)));

    cluster.restart(victim);
    if create.status.success() {
        let layout = cluster.client().stat(&format!("/d{live}/new-file")).unwrap().layout.expect("a file's layout");
        let on_victim = layout.datafiles.iter().filter(|d| server_of_inode(&cluster, d.0) == victim).count();
        assert_eq!(on_victim, 0, "new file striped over the dead server: {:?}", layout.datafiles);
    }
    ok(&format!("cmp {m}/striped {m}/../striped.copy"));
    ok(&format!("echo after > {}/after && cat {}/after", q(&live_dir), q(&live_dir)));
}

#[test]
fn daemon_mode_and_umount() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mnt");
    std::fs::create_dir(&path).unwrap();
    struct Detach(PathBuf);
    impl Drop for Detach {
        fn drop(&mut self) {
            if is_mounted(&self.0) {
                detach(&self.0);
            }
        }
    }
    let _guard = Detach(path.clone());
    let status = Command::new(mount_bin())
        .arg("--config")
        .arg(&cluster.config_path)
        .arg("--daemon")
        .arg("--log")
        .arg(dir.path().join("daemon.log"))
        .arg(&path)
        .status()
        .expect("run daemon");
    assert!(status.success());
    // The parent returned only once the mount was live.
    assert!(is_mounted(&path));
    ok(&format!("echo daemon > {}/f && cat {}/f", q(&path), q(&path)));
    let status = Command::new(mount_bin()).arg("--umount").arg(&path).status().expect("umount");
    assert!(status.success());
    assert!(!is_mounted(&path));
}

#[test]
fn killed_mount_process_unmounts() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mut mount = Mount::start(&cluster, &[]);
    ok(&format!("echo x > {}/f", q(&mount.path)));
    assert!(mount.pid() > 0);
    mount.kill();
    // The watchdog detaches the mount; no ENOTCONN is left.
    let start = Instant::now();
    while is_mounted(&mount.path) {
        assert!(start.elapsed() < Duration::from_secs(60), "mount left behind after SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_dir(&mount.path).expect("mount point readable, not ENOTCONN");
}

#[test]
fn sigterm_unmounts_cleanly() {
    let _serial = serial();
    let cluster = Cluster::start(ClusterOptions::default());
    let mut mount = Mount::start(&cluster, &[]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(mount.pid() as i32, libc::SIGTERM) };
    let status = mount.child.as_mut().unwrap().wait().unwrap();
    mount.child = None;
    assert!(status.success(), "exit status {status}: {}", mount.log_text());
    assert!(!is_mounted(&mount.path));
}

fn small_reserve(config: &mut weft_config::Config) {
    config.durability.metadata_reserve_bytes = 8 << 20;
}

/// `df -B1` of the mount: (total, available) bytes.
fn df(m: &str) -> (u64, u64) {
    let out = ok(&format!("df -B1 --output=size,avail {m} | tail -1"));
    let mut fields = out.split_whitespace().map(|f| f.parse::<u64>().expect("a number"));
    (fields.next().expect("size"), fields.next().expect("avail"))
}

/// A full disk through the mount (issue 21, item 6): two servers keep
/// their storage on one 64 MiB tmpfs. `df` counts the disk once; `cp` of
/// more than fits fails with "No space left on device" and leaves earlier
/// files intact; creating empty files on the full disk stops at ENOSPC;
/// `rm` works on the full disk, `df` shows the space back and a new copy
/// fits.
#[test]
fn full_disk_cp_gets_enospc_and_rm_frees_space() {
    let _serial = serial();
    let disk = weft_testkit::Tmpfs::mount(64 << 20);
    let cluster = Cluster::start(ClusterOptions {
        servers: 2,
        tune: Some(small_reserve),
        storage_root: Some(disk.path.clone()),
        ..Default::default()
    });
    let mount = Mount::start(&cluster, &[]);
    let local = tempfile::tempdir().unwrap();
    let (m, l) = (q(&mount.path), q(local.path()));
    let (disk_total, _) = disk.space();
    assert_eq!(df(&m).0, disk_total, "one disk under two servers counts once");

    ok(&format!("mkdir {m}/many"));
    ok(&format!("head -c 16M /dev/urandom > {l}/a && cp {l}/a {m}/a && cmp {l}/a {m}/a"));
    ok(&format!("head -c 64M /dev/urandom > {l}/b"));
    let copy = bash(&format!("cp {l}/b {m}/b"));
    let stderr = String::from_utf8_lossy(&copy.stderr);
    assert!(!copy.status.success(), "cp of 64 MiB onto a 64 MiB disk succeeded");
    assert!(stderr.contains("No space left on device"), "cp on a full disk: {stderr}");
    ok(&format!("cmp {l}/a {m}/a"));
    // What cp got acknowledged reads back: the partial file is a prefix of
    // b, but for the refused write (at most 1 MiB), of which one of the two
    // servers may have stored its strips.
    let partial: u64 = ok(&format!("stat -c %s {m}/b")).trim().parse().expect("size");
    let acknowledged = partial.saturating_sub(1 << 20);
    assert!(acknowledged > 0, "nothing of b was written: size {partial}");
    ok(&format!("cmp -n {acknowledged} {l}/b {m}/b"));

    // A metadata fill: empty files until ENOSPC.
    let fill =
        bash(&format!("i=0; while : > {m}/many/e$i; do i=$((i + 1)); [ $i -lt 100000 ] || exit 3; done; echo $i"));
    let stderr = String::from_utf8_lossy(&fill.stderr);
    assert!(fill.status.success(), "creates never ran out of space: {stderr}");
    assert!(stderr.contains("No space left on device"), "create on a full disk: {stderr}");
    let created: u64 = String::from_utf8_lossy(&fill.stdout).trim().parse().expect("a count");

    // rm works on the full disk; df shows the space back.
    ok(&format!("rm -r {m}/many && rm {m}/b {m}/a && test ! -e {m}/a"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while df(&m).1 < partial / 2 + (12 << 20) {
        assert!(Instant::now() < deadline, "removed files' space never came back: df {:?} ({created} creates)", df(&m));
        std::thread::sleep(Duration::from_millis(50));
    }
    ok(&format!("cp {l}/a {m}/c && cmp {l}/a {m}/c"));
}
