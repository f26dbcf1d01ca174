//! Every stored format carries a version: a server whose store
//! (`meta.redb`), metadata log (`meta.wal`) or bytestream directory
//! (`data/FORMAT`) names a version this build does not read refuses to
//! start, with a message naming the file and both versions, and leaves the
//! storage untouched (putting the version back restores service and data).
//! The wire protocol's version is checked in `bad_input.rs`.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use weft_client::CreateOptions;
use weft_testkit::{command_dying_with_parent, weft_bin, Cluster, ClusterOptions};

/// A server process this test started; killed on drop (also on failure).
struct Refused(Child);

impl Drop for Refused {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts server 0 of `cluster` on its own and expects it to exit with an
/// error within 30 s; returns what it printed.
fn start_expecting_refusal(cluster: &Cluster) -> String {
    let output = cluster.dir.path().join("refused.log");
    let log = std::fs::File::create(&output).unwrap();
    let child = command_dying_with_parent(&weft_bin())
        .args(["server", "--config"])
        .arg(&cluster.config_path)
        .args(["--id", "0"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut child = Refused(child);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the server did not refuse its storage");
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(!status.success(), "the server exited successfully:\n{text}");
    text
}

fn storage(cluster: &Cluster) -> PathBuf {
    cluster.config.server(0).unwrap().storage.clone()
}

fn set_store_format(dir: &Path, version: u32) {
    let db = redb::Database::open(dir.join("meta.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let definition: redb::TableDefinition<&str, u32> = redb::TableDefinition::new("format");
        txn.open_table(definition).unwrap().insert("store", version).unwrap();
    }
    txn.commit().unwrap();
}

fn check_file(cluster: &Cluster, expected: &[u8]) {
    let c = cluster.client();
    let f = c.open("/f", 4).unwrap();
    let mut buf = vec![0u8; expected.len()];
    assert_eq!(c.read_at(&f, 0, &mut buf).unwrap(), expected.len());
    assert_eq!(buf, expected);
}

#[test]
fn storage_of_an_unknown_format_version_is_refused_and_left_untouched() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    {
        let c = cluster.client();
        let f = c.create("/f", CreateOptions::default()).unwrap();
        c.write_at(&f, 0, &data).unwrap();
        c.fsync(&f).unwrap();
    }
    cluster.terminate(0);
    let dir = storage(&cluster);

    // The key/value store.
    set_store_format(&dir, 2);
    let text = start_expecting_refusal(&cluster);
    assert!(
        text.contains("meta.redb: store format version 2 is not known to this build (it reads version 1)"),
        "{text}"
    );
    set_store_format(&dir, 1);
    cluster.restart(0);
    check_file(&cluster, &data);
    cluster.terminate(0);

    // The metadata log: the eighth byte of its header is the version.
    let wal = std::fs::OpenOptions::new().read(true).write(true).open(dir.join("meta.wal")).unwrap();
    let mut header = [0u8; 16];
    wal.read_exact_at(&mut header, 0).unwrap();
    assert_eq!(&header[..8], b"WEFTWAL1");
    wal.write_all_at(b"3", 7).unwrap();
    let text = start_expecting_refusal(&cluster);
    assert!(
        text.contains("meta.wal: metadata log format version 3 is not known to this build (it reads version 1)"),
        "{text}"
    );
    wal.read_exact_at(&mut header, 0).unwrap();
    assert_eq!(&header[..8], b"WEFTWAL3", "the refused log was not overwritten");
    wal.write_all_at(b"1", 7).unwrap();
    cluster.restart(0);
    check_file(&cluster, &data);
    cluster.terminate(0);

    // The bytestream directory.
    let format = dir.join("data").join("FORMAT");
    assert_eq!(std::fs::read_to_string(&format).unwrap(), "weft-bytestreams 1\n");
    std::fs::write(&format, "weft-bytestreams 4\n").unwrap();
    let text = start_expecting_refusal(&cluster);
    assert!(text.contains("bytestream layout version 4 is not known to this build (it reads version 1)"), "{text}");
    assert!(text.contains("version mismatch"), "the exit message names the cause: {text}");
    std::fs::write(&format, "weft-bytestreams 1\n").unwrap();
    cluster.restart(0);
    check_file(&cluster, &data);
}
