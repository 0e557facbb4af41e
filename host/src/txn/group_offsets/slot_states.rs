//! Where each group slot this broker owns stands for transactional offsets, and the
//! one lock under which a slot is handed to the coordinator plugin or taken from it.
//!
//! A slot owned in ZooKeeper reaches the plugin (`CoordinatorClient::slot_gained`)
//! only together with its staged offsets, which can be read only after the transaction
//! store's takeover has fenced the previous owner. `cluster::sync` hands a slot over at
//! once when the takeover is done; otherwise it *defers* the slot and the outcome
//! follower ([`super::outcome::run`]) hands it over after the takeover. Until then the
//! plugin does not coordinate the slot (its groups get NOT_COORDINATOR, which clients
//! retry), so OffsetFetch with `require_stable` can never answer stable for offsets
//! still pending. Stagings and outcomes of a slot are served only once it is handed
//! over ([`SlotStates::is_restored`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Mutex,
};

/// A slot owned but not handed to the plugin yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferred {
    /// The slot's previous owner has not coordinated it for at least this long, ms
    /// (when it was deferred; only grows since).
    pub stopped_ms: u64,
    /// Tells this deferral apart from a later one of the same slot.
    pub token: u64,
}

#[derive(Debug, Default)]
struct Inner {
    deferred: BTreeMap<u32, Deferred>,
    restored: BTreeSet<u32>,
    next_token: u64,
}

/// The slots deferred and handed over; see the module docs.
#[derive(Debug, Default)]
pub struct SlotStates {
    inner: Mutex<Inner>,
    handover: tokio::sync::Mutex<()>,
    wake: tokio::sync::Notify,
}

impl SlotStates {
    /// Held while a slot is handed to the plugin or taken from it, so the driver gets
    /// gains and losses in the order ownership changed.
    pub async fn handover(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.handover.lock().await
    }

    /// `slot` is owned but its staged offsets cannot be read yet: the follower hands it
    /// over later. Wakes the follower.
    pub fn defer(&self, slot: u32, stopped_ms: u64) {
        {
            let mut s = self.lock();
            s.next_token += 1;
            let token = s.next_token;
            s.restored.remove(&slot);
            s.deferred.insert(slot, Deferred { stopped_ms, token });
        }
        self.wake();
    }

    /// `slot` was handed to the plugin with its staged offsets.
    pub fn restored(&self, slot: u32) {
        let mut s = self.lock();
        s.deferred.remove(&slot);
        s.restored.insert(slot);
    }

    /// `slot` was lost: neither deferred nor handed over any more.
    pub fn lost(&self, slot: u32) {
        let mut s = self.lock();
        s.deferred.remove(&slot);
        s.restored.remove(&slot);
    }

    /// Whether `slot` was handed over with its staged offsets (stagings and outcomes
    /// are served).
    pub fn is_restored(&self, slot: u32) -> bool {
        self.lock().restored.contains(&slot)
    }

    /// `slot`'s deferral, if it is deferred.
    pub fn deferral(&self, slot: u32) -> Option<Deferred> {
        self.lock().deferred.get(&slot).copied()
    }

    /// Every deferred slot.
    pub fn deferred(&self) -> Vec<(u32, Deferred)> {
        self.lock().deferred.iter().map(|(s, d)| (*s, *d)).collect()
    }

    /// The slots handed over.
    pub fn restored_set(&self) -> BTreeSet<u32> {
        self.lock().restored.clone()
    }

    /// Wakes the follower (a slot deferred or taken over).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves when [`SlotStates::wake`] was called (since the last wait).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferral_lost_and_deferred_again_is_a_new_one() {
        let s = SlotStates::default();
        s.defer(3, 100);
        let first = s.deferral(3).unwrap();
        assert!(!s.is_restored(3));
        s.lost(3);
        assert_eq!(s.deferral(3), None);
        s.defer(3, 50);
        let second = s.deferral(3).unwrap();
        assert_ne!(first.token, second.token);
        assert_eq!(second.stopped_ms, 50);
        s.restored(3);
        assert!(s.is_restored(3));
        assert!(s.deferred().is_empty());
        s.lost(3);
        assert!(!s.is_restored(3));
    }
}
