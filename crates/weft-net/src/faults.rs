//! Test-only fault injection in the transport: compiled in, off unless a
//! program asks for it explicitly, through the API (`Faults::set`, the
//! client's `ClientOptions::faults` and `set_faults`) or the `weft --faults
//! SPEC` option. The environment (`WEFT_FAULTS`) is not obeyed, so no
//! production client (the mount, the C API, MPI-IO) can be made to fail by
//! it; a malformed specification is an error, never ignored.
//!
//! Faults it can inject:
//! - `delay_ms=N`: sleep N ms before every request is sent and after every
//!   reply arrives (emulates a wide-area round trip);
//! - `fail_nth=N`: the N-th request (1-based, counted over the client)
//!   fails with `Unreachable` without being sent;
//! - `drop_after=N`: after N requests, the connection that carries the next
//!   one is closed under it (the request fails with `Unreachable`).
//!
//! A specification is a comma-separated list, e.g. `delay_ms=10,fail_nth=3`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Fault settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Added delay per message.
    pub delay: Duration,
    /// Fail the N-th request.
    pub fail_nth: Option<u64>,
    /// Drop the connection after N requests.
    pub drop_after: Option<u64>,
}

impl FaultConfig {
    /// Parses the `WEFT_FAULTS` syntax; unknown keys are an error.
    pub fn parse(text: &str) -> Result<FaultConfig, String> {
        let mut config = FaultConfig::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("fault `{item}` lacks `=`"))?;
            let number: u64 = value.parse().map_err(|_| format!("fault `{key}`: `{value}` is not a number"))?;
            match key {
                "delay_ms" => config.delay = Duration::from_millis(number),
                "fail_nth" => config.fail_nth = Some(number),
                "drop_after" => config.drop_after = Some(number),
                _ => return Err(format!("unknown fault `{key}`")),
            }
        }
        Ok(config)
    }

    /// The specification [`FaultConfig::parse`] reads back as this one.
    pub fn to_spec(&self) -> String {
        let mut items = Vec::new();
        if !self.delay.is_zero() {
            items.push(format!("delay_ms={}", self.delay.as_millis()));
        }
        if let Some(n) = self.fail_nth {
            items.push(format!("fail_nth={n}"));
        }
        if let Some(n) = self.drop_after {
            items.push(format!("drop_after={n}"));
        }
        items.join(",")
    }

    /// Whether any fault is enabled.
    pub fn is_active(&self) -> bool {
        *self != FaultConfig::default()
    }
}

/// What to do with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it normally.
    Pass,
    /// Fail it without sending.
    Fail,
    /// Close its connection.
    Drop,
}

/// Live fault state of one client.
#[derive(Debug, Default)]
pub struct Faults {
    config: std::sync::RwLock<FaultConfig>,
    requests: AtomicU64,
}

impl Faults {
    /// Replaces the settings and restarts the request count.
    pub fn set(&self, config: FaultConfig) {
        *self.config.write().expect("faults lock") = config;
        self.requests.store(0, Ordering::SeqCst);
    }

    /// The per-message delay.
    pub fn delay(&self) -> Duration {
        self.config.read().expect("faults lock").delay
    }

    /// Counts a request and decides its fate.
    pub fn judge(&self) -> Verdict {
        let config = self.config.read().expect("faults lock");
        if !config.is_active() {
            return Verdict::Pass;
        }
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        if config.fail_nth == Some(n) {
            return Verdict::Fail;
        }
        match config.drop_after {
            Some(after) if n > after => Verdict::Drop,
            _ => Verdict::Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_judges() {
        let config = FaultConfig::parse("delay_ms=5, fail_nth=2").unwrap();
        assert_eq!(config.delay, Duration::from_millis(5));
        let faults = Faults::default();
        faults.set(config);
        assert_eq!(faults.judge(), Verdict::Pass);
        assert_eq!(faults.judge(), Verdict::Fail);
        assert_eq!(faults.judge(), Verdict::Pass);
        assert!(FaultConfig::parse("bogus=1").is_err());
        assert!(FaultConfig::parse("delay_ms=x").is_err());
        assert!(FaultConfig::parse("delay_ms").is_err());
        let spec = "delay_ms=7,fail_nth=2,drop_after=9";
        assert_eq!(FaultConfig::parse(spec).unwrap().to_spec(), spec);
        assert_eq!(FaultConfig::default().to_spec(), "");
    }
}
