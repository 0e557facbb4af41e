//! Share-group state (KIP-932; issue 31 item 4) through the active offset store: the
//! durable snapshot of each share-partition ([`drover_abi::ShareStateRecord`],
//! offset-store ABI 3.2), routed as commits are (docs/design.md, "Offset stores and
//! hot swap"): to one store, or during a swap to both — the authoritative one first,
//! a failure on the new one before the switch failing the swap — so a swap carries
//! share state with the same promise as offsets (nothing lost, nothing resurrected).
//!
//! A store built before offset-store ABI 3.2, or one that does not keep share state,
//! is not a share-state target: every call says so ([`ShareStateError::Unsupported`]).

use drover_abi::{OffsetKey, ShareStateRecord, TopicPartitions};

use super::{read, swap, NamedStore, OffsetStores, Routing};
pub use crate::share::store::ShareStateError;
use crate::{plugins::CallError, share::store::ShareStateStore};

fn failed(e: CallError) -> ShareStateError {
    ShareStateError::Store(e.to_string())
}

/// Whether `store` keeps share state, as an error naming it when it does not.
pub fn check_target(store: &NamedStore) -> Result<(), ShareStateError> {
    if store.store.share_state_supported() {
        Ok(())
    } else {
        Err(ShareStateError::Unsupported(store.name.clone()))
    }
}

impl OffsetStores {
    /// Durably writes share-partition states to the authoritative store (and during a
    /// swap to the other one too), as [`OffsetStores::commit`] does for offsets.
    pub fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), ShareStateError> {
        let _gate = read(&self.gate);
        let routing = read(&self.routing).clone();
        match routing {
            Routing::Single(s) => {
                check_target(&s)?;
                s.store.write_share_state(batch).map_err(failed)?;
            }
            Routing::Dual {
                old,
                new,
                switched: false,
            } => {
                check_target(&old)?;
                old.store.write_share_state(batch).map_err(failed)?;
                if let Err(e) = new.store.write_share_state(batch) {
                    swap::fail(
                        self,
                        format!("writing share state to the new store `{}`: {e}", new.name),
                    );
                }
            }
            Routing::Dual {
                old,
                new,
                switched: true,
            } => {
                check_target(&new)?;
                new.store.write_share_state(batch).map_err(failed)?;
                if let Err(e) = old.store.write_share_state(batch) {
                    tracing::debug!("old offset store `{}` while draining: {e}", old.name);
                }
            }
        }
        Ok(())
    }

    /// `group`'s saved share-partition states of `partitions`, from the store reads
    /// come from.
    pub fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, ShareStateError> {
        let reader = self.reader();
        check_target(&reader)?;
        reader
            .store
            .read_share_state(group, partitions)
            .map_err(failed)
    }

    /// Deletes `group`'s share-partition states of `partitions` (all of the group's when
    /// empty) from both stores during a swap, like [`OffsetStores::delete_group`].
    pub fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, ShareStateError> {
        let _gate = read(&self.gate);
        let routing = read(&self.routing).clone();
        let (first, second, before_switch) = match routing {
            Routing::Single(s) => {
                check_target(&s)?;
                return s
                    .store
                    .delete_share_state(group, partitions)
                    .map_err(failed);
            }
            Routing::Dual { old, new, switched } => {
                if switched {
                    (new, old, false)
                } else {
                    (old, new, true)
                }
            }
        };
        check_target(&first)?;
        let n = first
            .store
            .delete_share_state(group, partitions)
            .map_err(failed)?;
        if let Err(e) = second.store.delete_share_state(group, partitions) {
            if before_switch {
                swap::fail(
                    self,
                    format!(
                        "deleting share state of `{group}` in the new store `{}`: {e}",
                        second.name
                    ),
                );
            }
        }
        Ok(n)
    }

    /// Up to `limit` share-partition states strictly after `after`, in key order (group,
    /// topic, partition), from the store reads come from.
    pub fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, ShareStateError> {
        let reader = self.reader();
        check_target(&reader)?;
        reader
            .store
            .scan_share_state(after.cloned(), limit)
            .map_err(failed)
    }

    /// Every share-partition state of `group`, at most `max`, in key order (topic,
    /// partition): the store's key-ordered scan from just before the group's first key,
    /// page by page, until another group's key.
    pub fn group_share_state(
        &self,
        group: &str,
        max: usize,
    ) -> Result<Vec<ShareStateRecord>, ShareStateError> {
        const PAGE: u32 = 1000;
        let mut out = Vec::new();
        let mut after = OffsetKey {
            group: group.into(),
            topic: "".into(),
            partition: i32::MIN,
        };
        loop {
            let page = self.scan_share_state(Some(&after), PAGE)?;
            let Some(last) = page.last() else {
                return Ok(out);
            };
            after = last.key();
            for r in page {
                if r.group.as_str() != group || out.len() >= max {
                    return Ok(out);
                }
                out.push(r);
            }
        }
    }

    /// Whether the store reads come from keeps share state.
    pub fn share_state_supported(&self) -> bool {
        self.reader().store.share_state_supported()
    }
}

impl ShareStateStore for OffsetStores {
    fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), ShareStateError> {
        OffsetStores::write_share_state(self, batch)
    }

    fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, ShareStateError> {
        OffsetStores::read_share_state(self, group, partitions)
    }
}

/// Copies every share-partition state of `old` into `new` and removes from `new` those
/// `old` does not hold, page by page under the commit gate (the swap's copy step for
/// share state). Returns how many were copied. A `new` without share-state support is
/// refused when `old` holds any.
pub(super) fn copy(
    stores: &OffsetStores,
    old: &NamedStore,
    new: &NamedStore,
) -> Result<u64, String> {
    const PAGE: u32 = 500;
    if !old.store.share_state_supported() {
        return Ok(0);
    }
    let supported = new.store.share_state_supported();
    let mut copied = 0u64;
    let mut after: Option<OffsetKey> = None;
    loop {
        let _gate = super::write(&stores.gate);
        let page = old
            .store
            .scan_share_state(after.clone(), PAGE)
            .map_err(|e| format!("reading share state of `{}`: {e}", old.name))?;
        let Some(last) = page.last().map(ShareStateRecord::key) else {
            break;
        };
        if !supported {
            return Err(format!(
                "the offset store `{}` keeps no share-group state (it needs offset-store ABI 3.2), and `{}` holds share state",
                new.name, old.name
            ));
        }
        new.store
            .write_share_state(&page)
            .map_err(|e| format!("writing share state to `{}`: {e}", new.name))?;
        copied += page.len() as u64;
        after = Some(last);
    }
    if supported {
        remove_stale(stores, old, new)?;
    }
    Ok(copied)
}

/// Deletes from `new` the share-partition states `old` does not hold (left from an
/// earlier time `new` was active), so swapping back never resurrects a deleted state.
fn remove_stale(stores: &OffsetStores, old: &NamedStore, new: &NamedStore) -> Result<(), String> {
    const PAGE: u32 = 500;
    let mut after: Option<OffsetKey> = None;
    loop {
        let _gate = super::write(&stores.gate);
        let page = new
            .store
            .scan_share_state(after.clone(), PAGE)
            .map_err(|e| format!("reading share state of `{}`: {e}", new.name))?;
        let Some(last) = page.last().map(ShareStateRecord::key) else {
            break;
        };
        for record in &page {
            let partitions = [TopicPartitions {
                topic: record.topic.clone(),
                partitions: vec![record.partition].into(),
            }];
            let held = old
                .store
                .read_share_state(&record.group, &partitions)
                .map_err(|e| format!("reading share state of `{}`: {e}", old.name))?;
            if held.is_empty() {
                new.store
                    .delete_share_state(&record.group, &partitions)
                    .map_err(|e| format!("deleting share state in `{}`: {e}", new.name))?;
            }
        }
        after = Some(last);
    }
    Ok(())
}
