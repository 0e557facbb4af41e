//! The active offset store, and swapping it on a running broker (DESIGN.md, "Offset
//! stores and hot swap").
//!
//! Everything that reads or writes committed offsets — the coordinator's store worker,
//! the admin API, retention — goes through [`OffsetStores`]. Normally it forwards to
//! one store. During a swap ([`swap`]) it writes every commit to both stores and reads
//! from the old one while existing offsets are copied across, then reads from the new
//! one, then drops the old one:
//!
//! - **No lost commit**: a commit is acknowledged only once it is in the store that is
//!   (or will be) authoritative; while copying, that is the old store (the new one
//!   gets it too, or the swap fails and the broker stays on the old one); after the
//!   switch, the new one.
//! - **No stale read**: copying a page of offsets excludes commits for that moment (a
//!   write lock the commits share as readers), so a copied value never overwrites a
//!   newer one written to both stores; reads switch only after every offset is across.

pub mod retention;
pub mod swap;

use std::sync::{Arc, Mutex, RwLock};

use drover_abi::{OffsetKey, OffsetRecord, TopicPartitions};
use serde::Serialize;

use crate::plugins::{CallError, OffsetStoreHandle};

/// A store and the plugin name it came from.
#[derive(Clone)]
pub struct NamedStore {
    /// Plugin name (`embedded`, `zookeeper`, `postgres`, ...).
    pub name: String,
    /// The open instance.
    pub store: Arc<OffsetStoreHandle>,
}

/// Which store serves reads and writes.
#[derive(Clone)]
enum Routing {
    /// One store.
    Single(NamedStore),
    /// A swap: commits go to both; reads from `old` until `switched`.
    Dual {
        old: NamedStore,
        new: NamedStore,
        switched: bool,
    },
}

/// What `GET /v1/offset-store` shows.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SwapStatus {
    /// `idle`, `opening`, `copying`, `switching`, `draining`, `completed` or `failed`.
    pub state: String,
    /// Store swapped from.
    pub from: Option<String>,
    /// Store swapped to.
    pub to: Option<String>,
    /// Offsets copied so far.
    pub copied: u64,
    /// Offsets to copy (counted when the copy starts).
    pub total: u64,
    /// Why the swap failed (the broker stayed on `from`).
    pub error: Option<String>,
    /// Wall-clock ms when the swap started and finished.
    pub started_ms: Option<i64>,
    /// Wall-clock ms when the swap ended.
    pub finished_ms: Option<i64>,
}

/// The active offset store, swappable while the broker runs.
pub struct OffsetStores {
    routing: RwLock<Routing>,
    /// Commits hold it shared; a swap holds it exclusively to copy a page or to
    /// change the routing.
    gate: RwLock<()>,
    status: Mutex<SwapStatus>,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl OffsetStores {
    /// Starts with `active`.
    pub fn new(active: NamedStore) -> Arc<OffsetStores> {
        Arc::new(OffsetStores {
            routing: RwLock::new(Routing::Single(active)),
            gate: RwLock::new(()),
            status: Mutex::new(SwapStatus {
                state: "idle".into(),
                ..SwapStatus::default()
            }),
        })
    }

    /// Routing as during a swap that is copying from `old` to `new` (`switched`
    /// false: reads from `old`) or draining `old` (`switched` true: reads from `new`);
    /// commits and deletes reach both. For tests of what happens during a swap: a real
    /// swap is [`swap::start`].
    #[doc(hidden)]
    pub fn swapping(old: NamedStore, new: NamedStore, switched: bool) -> Arc<OffsetStores> {
        let stores = OffsetStores::new(old.clone());
        *write(&stores.routing) = Routing::Dual { old, new, switched };
        stores
    }

    /// The store reads come from now.
    pub fn reader(&self) -> NamedStore {
        match &*read(&self.routing) {
            Routing::Single(s) => s.clone(),
            Routing::Dual {
                old, new, switched, ..
            } => {
                if *switched {
                    new.clone()
                } else {
                    old.clone()
                }
            }
        }
    }

    /// The name of the store reads come from.
    pub fn active_name(&self) -> String {
        self.reader().name
    }

    /// The swap status.
    pub fn status(&self) -> SwapStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_status(&self, f: impl FnOnce(&mut SwapStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Durably commits a batch to the authoritative store (and, during a swap, to the
    /// other one as well; see the module docs).
    pub fn commit(&self, batch: &[OffsetRecord]) -> Result<(), CallError> {
        let _gate = read(&self.gate);
        let routing = read(&self.routing).clone();
        match routing {
            Routing::Single(s) => s.store.commit(batch),
            Routing::Dual {
                old,
                new,
                switched: false,
            } => {
                old.store.commit(batch)?;
                if let Err(e) = new.store.commit(batch) {
                    // The old store has it and stays authoritative: the swap fails.
                    swap::fail(
                        self,
                        format!("writing to the new store `{}`: {e}", new.name),
                    );
                }
                Ok(())
            }
            Routing::Dual {
                old,
                new,
                switched: true,
            } => {
                new.store.commit(batch)?;
                if let Err(e) = old.store.commit(batch) {
                    tracing::debug!("old offset store `{}` while draining: {e}", old.name);
                }
                Ok(())
            }
        }
    }

    /// Committed offsets of `group` for `partitions`.
    pub fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, CallError> {
        self.reader().store.fetch(group, partitions)
    }

    /// Every committed offset of `group`.
    pub fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, CallError> {
        self.reader().store.fetch_group(group)
    }

    /// Every group with committed offsets.
    pub fn list_groups(&self) -> Result<Vec<String>, CallError> {
        self.reader().store.list_groups()
    }

    /// Deletes a group's offsets (from both stores during a swap).
    pub fn delete_group(&self, group: &str) -> Result<u64, CallError> {
        let _gate = read(&self.gate);
        let routing = read(&self.routing).clone();
        match routing {
            Routing::Single(s) => s.store.delete_group(group),
            Routing::Dual {
                old, new, switched, ..
            } => {
                let (first, second) = if switched { (new, old) } else { (old, new) };
                let n = first.store.delete_group(group)?;
                let _ = second.store.delete_group(group);
                Ok(n)
            }
        }
    }

    /// A page of the reader store, for copies and scans.
    pub fn scan(
        &self,
        after: Option<OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, CallError> {
        self.reader().store.scan(after, limit)
    }
}
