//! The configuration file parser (TOML, then validation), and the fault
//! specification parser. A configuration that parses must print as TOML
//! that parses to the same text again, and routing must answer for any
//! handle.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_config::Config;
use weft_proto::Handle;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = weft_net::faults::FaultConfig::parse(text);
    let Ok(config) = Config::parse(text, "fuzz.toml") else { return };
    let printed = config.to_toml();
    let again = Config::parse(&printed, "printed.toml").expect("a printed configuration parses");
    assert_eq!(again.to_toml(), printed, "printing is stable");
    let _ = (config.data_servers(), config.metadata_servers(), config.default_distribution());
    for handle in [0u64, 1, 1 << 48, u64::MAX, data.len() as u64] {
        if let Some(server) = config.server_of_handle(Handle(handle)) {
            assert!(config.server(server).is_some(), "routing names a configured server");
            let _ = (config.targets_of_server(server), config.primary_target(server));
        }
    }
});
