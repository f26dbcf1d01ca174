//! `weft_connect(NULL, ...)` reads `$WEFT_CONFIG`. Alone in its own test
//! binary (its own process) because it changes the environment, which is
//! unsound while other threads may read it.

use std::ptr::null;

use weft::{weft_connect, weft_disconnect, weft_fs_t, weft_stat};
use weft_testkit::{Cluster, ClusterOptions};

#[test]
fn null_config_path_uses_the_environment() {
    let mut fs: *mut weft_fs_t = std::ptr::null_mut();
    std::env::remove_var("WEFT_CONFIG");
    // SAFETY: NULL config path (allowed) and a valid out pointer.
    assert_eq!(unsafe { weft_connect(null(), &mut fs) }, -libc::EINVAL, "unset WEFT_CONFIG");

    let cluster = Cluster::start(ClusterOptions { servers: 2, ..ClusterOptions::default() });
    std::env::set_var("WEFT_CONFIG", &cluster.config_path);
    let mut stat = weft_stat::default();
    // SAFETY: valid pointers and strings.
    unsafe {
        assert_eq!(weft_connect(null(), &mut fs), 0);
        assert_eq!(weft::weft_stat(fs, c"weft:/".as_ptr(), &mut stat), 0);
        assert_eq!(weft_disconnect(fs), 0);
    }
}
