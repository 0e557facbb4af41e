//! Connection ids: every accepted connection gets one, as do the coordinator's own
//! one-request connections (the admin API's calls, [`crate::coordination::CoordinatorClient::call`]).
//!
//! An id is a plain `u64` because that is what crosses the coordinator ABI
//! (`CoordinatorInput::Frame { conn, .. }`, `drover_abi::coordinator`): the coordinator
//! keys its state by it, so an id is never reused in the process's lifetime.

use std::sync::atomic::{AtomicU64, Ordering};

/// A connection's id, unique for the process's lifetime (never 0).
pub type ConnId = u64;

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A fresh connection id.
pub fn next_conn_id() -> ConnId {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_never_reused() {
        let a = super::next_conn_id();
        let b = super::next_conn_id();
        assert!(a != 0 && b > a);
    }
}
