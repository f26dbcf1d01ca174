//! Where this server stands in the file system: its id and the
//! configuration, and the checks every part makes with them (is a handle,
//! a target, stored here?). Each part ([`crate::storage`],
//! [`crate::metadata`], [`crate::cluster`]) holds a copy; it is two words.

use std::sync::Arc;

use weft_config::Config;
use weft_proto::{ErrorCode, Handle, WeftResult};

/// This server's id and the file system configuration.
#[derive(Clone)]
pub struct Here {
    /// This server's id.
    pub server_id: u32,
    /// The file system configuration.
    pub config: Arc<Config>,
}

impl Here {
    /// Whether `handle` belongs to a target this server hosts.
    pub fn is_local(&self, handle: Handle) -> bool {
        self.config.server_of_handle(handle) == Some(self.server_id)
    }

    /// Checks that a handle belongs to a target this server hosts (`Stale` if not).
    pub fn local(&self, handle: Handle) -> WeftResult<()> {
        if self.is_local(handle) {
            Ok(())
        } else {
            Err(ErrorCode::Stale)
        }
    }

    /// Checks that this server hosts target `target_id` (`Invalid` if not).
    pub fn local_target(&self, target_id: u16) -> WeftResult<()> {
        match self.config.server_of_target(target_id) {
            Some(id) if id == self.server_id => Ok(()),
            _ => Err(ErrorCode::Invalid),
        }
    }
}
