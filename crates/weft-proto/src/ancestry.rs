//! Is one directory inside another? The walk up parent pointers that a
//! rename of a directory must make (a directory may not move below itself),
//! written once for every side that checks it: the client (client-driven
//! rename), a server across servers (aggregate rename) and a server within
//! its own store.
//!
//! Each caller only says how to find a parent; the walk, its end at the root
//! and its bound ([`PARENT_WALK_STEPS_MAX`], beyond which the answer is
//! `Loop`) are here.

use std::future::Future;

use crate::limits::PARENT_WALK_STEPS_MAX;
use crate::{ErrorCode, Handle, WeftResult};

/// Is `candidate` the directory `dir` or below it? `parent_of(h)` gives the
/// parent of `h`, or `None` where the walk cannot go on (then: no).
pub async fn is_within<F, Fut>(candidate: Handle, dir: Handle, mut parent_of: F) -> WeftResult<bool>
where
    F: FnMut(Handle) -> Fut,
    Fut: Future<Output = WeftResult<Option<Handle>>>,
{
    let mut current = candidate;
    for _ in 0..PARENT_WALK_STEPS_MAX {
        if current == dir {
            return Ok(true);
        }
        if current == Handle::ROOT {
            return Ok(false);
        }
        match parent_of(current).await? {
            Some(parent) => current = parent,
            None => return Ok(false),
        }
    }
    Err(ErrorCode::Loop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parent pointers of a chain 1 (root) <- 20 <- 21 <- ... <- 29.
    async fn chain(handle: Handle) -> WeftResult<Option<Handle>> {
        Ok(Some(if handle.0 == 20 { Handle::ROOT } else { Handle(handle.0 - 1) }))
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(future)
    }

    #[test]
    fn below_itself_and_not_below_a_sibling() {
        assert_eq!(block_on(is_within(Handle(29), Handle(25), chain)), Ok(true));
        assert_eq!(block_on(is_within(Handle(25), Handle(25), chain)), Ok(true));
        assert_eq!(block_on(is_within(Handle(24), Handle(25), chain)), Ok(false));
        assert_eq!(block_on(is_within(Handle(29), Handle(99), chain)), Ok(false));
    }

    #[test]
    fn a_cycle_is_a_loop_and_a_missing_parent_is_outside() {
        let cycle = |handle: Handle| async move { Ok(Some(handle)) };
        assert_eq!(block_on(is_within(Handle(7), Handle(8), cycle)), Err(ErrorCode::Loop));
        let orphan = |_| async { Ok(None) };
        assert_eq!(block_on(is_within(Handle(7), Handle(8), orphan)), Ok(false));
    }
}
