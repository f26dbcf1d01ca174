//! Object handles: 16-bit target id + 48-bit object id in one `u64`.
//!
//! The configuration maps a target to the server hosting it, so routing a
//! handle is a pure function of the configuration. Object ids come from
//! durably reserved blocks and are never reused. Object id 0 is invalid;
//! object id 1 on target 0 is the root directory.

use serde::{Deserialize, Serialize};

/// Bits of a handle that hold the object id.
pub const OBJECT_ID_BITS: u32 = 48;
/// Largest object id.
pub const OBJECT_ID_MAX: u64 = (1 << OBJECT_ID_BITS) - 1;
/// The first object id a target hands out (1 is reserved for the root on target 0).
pub const FIRST_OBJECT_ID: u64 = 16;

/// A 64-bit object handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Handle(pub u64);

impl Handle {
    /// The root directory's fixed handle.
    pub const ROOT: Handle = Handle(1);
    /// The null handle (never names an object).
    pub const NULL: Handle = Handle(0);

    /// Builds a handle; `None` if either part is out of range or the object id is 0.
    pub fn new(target_id: u16, object_id: u64) -> Option<Handle> {
        if object_id == 0 || object_id > OBJECT_ID_MAX {
            return None;
        }
        Some(Handle(((target_id as u64) << OBJECT_ID_BITS) | object_id))
    }

    /// The target (storage location) this handle lives on.
    pub fn target_id(self) -> u16 {
        (self.0 >> OBJECT_ID_BITS) as u16
    }

    /// The object id within its target.
    pub fn object_id(self) -> u64 {
        self.0 & OBJECT_ID_MAX
    }
}

impl std::fmt::Display for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{:x}", self.target_id(), self.object_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip() {
        let h = Handle::new(7, 12345).unwrap();
        assert_eq!(h.target_id(), 7);
        assert_eq!(h.object_id(), 12345);
        assert_eq!(Handle::ROOT, Handle::new(0, 1).unwrap());
        assert!(Handle::new(1, 0).is_none());
        assert!(Handle::new(1, OBJECT_ID_MAX + 1).is_none());
    }
}
