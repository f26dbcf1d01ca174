//! A job-scoped file system: `mpirun -np 3 weft server --id-from-env`
//! takes each server's id from the launcher's rank variable.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_testkit::{weft_bin, Cluster, ClusterOptions};

/// Kills the whole mpirun process group, also when the test fails.
struct Job(std::process::Child);

impl Drop for Job {
    fn drop(&mut self) {
        // mpirun forwards SIGTERM to the servers (a SIGKILL of mpirun would
        // orphan them); the group is killed if it has not ended in 20 s.
        let group = -(self.0.id() as i32);
        // SAFETY: signalling the process group this test created.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::kill(group, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Named `openmpi_*` like every test that needs MPI (`WEFT_SKIP_MPI=1
/// scripts/test.sh` leaves them out); fails when mpirun is missing.
#[test]
fn openmpi_servers_started_by_mpirun_take_their_rank_as_id() {
    assert!(
        Command::new("mpirun").arg("--version").output().is_ok(),
        "mpirun not found: run scripts/deps.sh, or leave the MPI tests out with WEFT_SKIP_MPI=1 scripts/test.sh"
    );
    // Borrow a cluster's configuration and storage layout, but stop its servers.
    let mut template = Cluster::start(ClusterOptions { servers: 3, ..Default::default() });
    for id in 0..3 {
        template.terminate(id);
    }
    let job = Job(Command::new("mpirun")
        .args(["-np", "3", "--oversubscribe"])
        .arg(weft_bin())
        .args(["server", "--config"])
        .arg(&template.config_path)
        .arg("--id-from-env")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("mpirun"));
    let client = template.client();
    let start = Instant::now();
    while client.block_on(client.client().ping_all()).iter().any(|(_, r)| r.is_err()) {
        assert!(start.elapsed() < Duration::from_secs(60), "servers under mpirun did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Every server answers as the id its rank gave it, and the file system works.
    client.mkdir("/job", 0o755).unwrap();
    let f = client.create("/job/data", Default::default()).unwrap();
    client.write_at(&f, 0, &vec![7u8; 300_000]).unwrap();
    assert_eq!(client.stat("/job/data").unwrap().size, 300_000);
    let ids: Vec<u32> = client.statfs().unwrap().servers.iter().map(|s| s.server_id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    drop(job);
    // The servers went with the job.
    assert!(client.block_on(client.client().ping_all()).iter().all(|(_, r)| r.is_err()));
}
