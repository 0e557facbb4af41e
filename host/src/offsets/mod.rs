//! The active offset store, and swapping it on a running broker (docs/design.md, "Offset
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
//! - **No deletion undone**: deletions reach both stores during a swap (a failure on the
//!   new one fails the swap), and the copy also removes from the new store whatever
//!   the old one does not hold (offsets left there from an earlier time it was active),
//!   so swapping back never brings a deleted offset back.
//! - **Durable choice**: the store a swap makes active is recorded in the data
//!   directory before reads switch to it ([`active`]), so a restart reopens it; shutdown
//!   flushes and closes the active store ([`OffsetStores::close`]).

pub mod active;
pub mod retention;
pub mod share_state;
pub mod swap;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, RwLock,
    },
    thread::JoinHandle,
};

use drover_abi::{ErrorKind, OffsetKey, OffsetRecord, TopicPartitions};
use serde::Serialize;

use crate::plugins::{CallError, OffsetStoreHandle};

/// A store, the plugin name it came from and the config it was opened with.
#[derive(Clone)]
pub struct NamedStore {
    /// Plugin name (`embedded`, `zookeeper`, `postgres`, ...).
    pub name: String,
    /// The config it was opened with (TOML text).
    pub config: String,
    /// The open instance.
    pub store: Arc<OffsetStoreHandle>,
}

impl NamedStore {
    /// Its plugin name and config.
    pub fn spec(&self) -> active::StoreSpec {
        active::StoreSpec {
            plugin: self.name.clone(),
            config: self.config.clone(),
        }
    }
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
    /// Set by [`OffsetStores::close`]: no swap starts, a running one gives up.
    stopping: AtomicBool,
    /// The running (or last) swap's thread. Its lock also orders a swap's move to
    /// dual writes against shutdown ([`OffsetStores::close`]).
    swap_thread: Mutex<Option<JoinHandle<()>>>,
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
            stopping: AtomicBool::new(false),
            swap_thread: Mutex::new(None),
        })
    }

    /// Shutdown: no swap starts any more; a swap that already writes to both stores is
    /// stopped (it rolls back to the old store and closes the new one) and waited for;
    /// one still opening its store is left to give up by itself (the routing is not
    /// changed by it any more). Then flushes and closes the active store. Later calls
    /// do nothing (a handle closes once).
    pub fn close(&self) -> Result<(), CallError> {
        let running = {
            let mut thread = self.swap_thread.lock().unwrap_or_else(|e| e.into_inner());
            self.stopping.store(true, Ordering::Release);
            if matches!(*read(&self.routing), Routing::Dual { .. }) {
                thread.take()
            } else {
                None
            }
        };
        if let Some(thread) = running {
            let _ = thread.join();
        }
        let active = self.reader();
        let flushed = active.store.flush();
        if let Err(e) = &flushed {
            tracing::warn!(store = %active.name, "flushing the active offset store: {e}");
        }
        active.store.close()?;
        tracing::info!(store = %active.name, "active offset store closed");
        flushed
    }

    /// Whether shutdown has begun.
    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
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

    /// Deletes a group's offsets: from both stores during a swap, like commits — the
    /// authoritative one first; before the switch a failure on the new store fails the
    /// swap (it would otherwise keep what was deleted).
    pub fn delete_group(&self, group: &str) -> Result<u64, CallError> {
        let _gate = read(&self.gate);
        let routing = read(&self.routing).clone();
        match routing {
            Routing::Single(s) => s.store.delete_group(group),
            Routing::Dual {
                old,
                new,
                switched: false,
            } => {
                let n = old.store.delete_group(group)?;
                if let Err(e) = new.store.delete_group(group) {
                    swap::fail(
                        self,
                        format!(
                            "deleting group `{group}` in the new store `{}`: {e}",
                            new.name
                        ),
                    );
                }
                Ok(n)
            }
            Routing::Dual {
                old,
                new,
                switched: true,
            } => {
                let n = new.store.delete_group(group)?;
                if let Err(e) = old.store.delete_group(group) {
                    tracing::debug!("old offset store `{}` while draining: {e}", old.name);
                }
                Ok(n)
            }
        }
    }

    /// Deletes `group`'s offsets of `partitions` in one step, where the active store
    /// offers it (offset-store ABI 3.1); `Ok(None)` when it does not, and during a swap
    /// (two stores cannot delete atomically together): the caller then falls back to
    /// [`OffsetStores::delete_group`] and a commit of the offsets to keep.
    pub fn delete_partitions(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Option<u64>, CallError> {
        let _gate = read(&self.gate);
        let routing = read(&self.routing).clone();
        match routing {
            Routing::Single(s) => match s.store.delete_partitions(group, partitions) {
                Err(CallError::Plugin { error, .. }) if error.kind == ErrorKind::Unsupported => {
                    Ok(None)
                }
                other => other.map(Some),
            },
            Routing::Dual { .. } => Ok(None),
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
