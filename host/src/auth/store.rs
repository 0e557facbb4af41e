//! The credential store: where SCRAM credentials live and how they change.
//!
//! - **Standalone**: the document in the data directory ([`super::file_store`]); an
//!   alteration is applied to the copy in memory and written (atomically, fsynced)
//!   before it is answered, under one lock, so alterations are serialised.
//! - **Cluster mode**: one ZooKeeper node, `<chroot>/config/scram_credentials`
//!   ([`super::zk_store`]). Describe reads the node; an alteration is a versioned
//!   read-modify-write of it (retried when another broker wrote in between), so two
//!   brokers' concurrent alterations both stick. Every broker follows the node with a
//!   watch ([`super::zk_store::follow`]) and authenticates against its copy, so an
//!   alteration on one broker takes effect on the others within a watch round trip.
//!
//! Authentication reads [`CredentialStore::snapshot`]: an `Arc` swapped whole on every
//! change, never a lock held across an exchange.

use std::sync::{
    atomic::{AtomicBool, AtomicI64, Ordering},
    Arc, Mutex, RwLock,
};

use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

pub use super::error::StoreError;
use super::{credentials::CredentialTable, decoy::Snapshot, file_store::FileStore, kip554};

enum Backend {
    /// Tests: nothing is written.
    Memory,
    /// Standalone.
    File(FileStore),
    /// Cluster mode.
    Zk(Arc<crate::cluster::Cluster>),
}

/// The broker's SCRAM credentials (see the module docs).
pub struct CredentialStore {
    backend: Backend,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The version of the snapshot: the ZooKeeper node's data version, or a counter.
    version: AtomicI64,
    /// Whether the snapshot holds the stored credentials yet (cluster mode: after the
    /// first read of the node).
    loaded: AtomicBool,
    /// Serialises standalone alterations (read, apply, write, swap).
    writing: Mutex<()>,
    max_users: usize,
}

impl std::fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialStore")
            .field("loaded", &self.is_loaded())
            .field("users", &self.snapshot().table().user_count())
            .finish_non_exhaustive()
    }
}

impl CredentialStore {
    /// The standalone store of `data_dir` ([`FileStore::open`]), at most `max_users`
    /// users. Blocking.
    pub fn open_file(
        data_dir: &std::path::Path,
        max_users: usize,
    ) -> Result<CredentialStore, StoreError> {
        let (file, table) = FileStore::open(data_dir)?;
        Ok(CredentialStore::new(
            Backend::File(file),
            table,
            true,
            max_users,
        ))
    }

    /// A store kept in memory only, holding `table` (tests).
    pub fn in_memory(table: CredentialTable, max_users: usize) -> CredentialStore {
        CredentialStore::new(Backend::Memory, table, true, max_users)
    }

    /// The cluster-mode store over `cluster`'s ZooKeeper session. Empty and not
    /// loaded until [`super::zk_store::follow`] has read the node.
    pub fn open_cluster(
        cluster: Arc<crate::cluster::Cluster>,
        max_users: usize,
    ) -> Result<CredentialStore, StoreError> {
        let placeholder = CredentialTable::new().map_err(StoreError::Random)?;
        Ok(CredentialStore::new(
            Backend::Zk(cluster),
            placeholder,
            false,
            max_users,
        ))
    }

    /// A store kept in memory that has not loaded yet, as the cluster-mode store before
    /// its first read (tests).
    #[cfg(test)]
    pub(crate) fn not_loaded(table: CredentialTable) -> CredentialStore {
        CredentialStore::new(Backend::Memory, table, false, 10)
    }

    fn new(
        backend: Backend,
        table: CredentialTable,
        loaded: bool,
        max_users: usize,
    ) -> CredentialStore {
        CredentialStore {
            backend,
            snapshot: RwLock::new(Arc::new(Snapshot::new(table))),
            version: AtomicI64::new(if loaded { 0 } else { -1 }),
            loaded: AtomicBool::new(loaded),
            writing: Mutex::new(()),
            max_users,
        }
    }

    /// The credentials as authentication reads them now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether the stored credentials have been read (always standalone; in cluster
    /// mode once the node was read). Until then every user is unknown.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Most users the store keeps (`sasl.max_scram_users`).
    pub fn max_users(&self) -> usize {
        self.max_users
    }

    /// The cluster this store follows, in cluster mode.
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        match &self.backend {
            Backend::Zk(c) => Some(c),
            _ => None,
        }
    }

    /// Replaces the snapshot with `table` at `version` unless it already holds that
    /// version or a newer one; whether it changed. `version` is the ZooKeeper node's
    /// data version (cluster mode).
    pub fn install(&self, table: CredentialTable, version: i64) -> bool {
        let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        let was_loaded = self.loaded.swap(true, Ordering::AcqRel);
        if was_loaded && self.version.load(Ordering::Acquire) >= version {
            return false;
        }
        self.version.store(version, Ordering::Release);
        *current = Arc::new(Snapshot::new(table));
        true
    }

    /// DescribeUserScramCredentials' answer (KIP-554, [`kip554::describe`]): from
    /// memory standalone, from the ZooKeeper node in cluster mode. Blocking.
    pub fn describe(
        &self,
        request: &DescribeUserScramCredentialsRequest,
    ) -> Result<DescribeUserScramCredentialsResponse, StoreError> {
        match &self.backend {
            Backend::Zk(cluster) => {
                let (table, version) = super::zk_store::read(cluster)?;
                let response = kip554::describe(&table, request);
                self.install(table, i64::from(version));
                Ok(response)
            }
            _ => Ok(kip554::describe(self.snapshot().table(), request)),
        }
    }

    /// Applies an AlterUserScramCredentials request (KIP-554, [`kip554::alter`]) and
    /// answers once the change is durable (written and fsynced, or in ZooKeeper).
    /// Blocking: call from a blocking thread.
    pub fn alter(
        &self,
        request: &AlterUserScramCredentialsRequest,
    ) -> Result<AlterUserScramCredentialsResponse, StoreError> {
        match &self.backend {
            Backend::Zk(cluster) => {
                let (altered, version) = super::zk_store::alter(cluster, |table| {
                    kip554::alter(table, request, self.max_users)
                })?;
                if let (Some(table), Some(version)) = (altered.table, version) {
                    self.install(table, i64::from(version));
                }
                Ok(altered.response)
            }
            Backend::File(_) | Backend::Memory => {
                let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
                let current = self.snapshot();
                let altered = kip554::alter(current.table(), request, self.max_users);
                if let Some(table) = altered.table {
                    if let Backend::File(file) = &self.backend {
                        file.write(&table)?;
                    }
                    let version = self.version.load(Ordering::Acquire) + 1;
                    self.install(table, version);
                }
                Ok(altered.response)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::{
        messages::alter_user_scram_credentials_request::ScramCredentialUpsertion,
        protocol::StrBytes,
    };

    use super::*;
    use crate::auth::mechanism::ScramMechanism;

    fn upsert(name: &str) -> AlterUserScramCredentialsRequest {
        let mut u = ScramCredentialUpsertion::default();
        u.name = StrBytes::from_string(name.into());
        u.mechanism = 1;
        u.iterations = 4096;
        u.salt = Bytes::from_static(b"salt");
        u.salted_password = Bytes::from(vec![2u8; 32]);
        let mut r = AlterUserScramCredentialsRequest::default();
        r.upsertions = vec![u];
        r
    }

    #[test]
    fn standalone_alterations_are_durable_and_seen_by_authentication() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open_file(dir.path(), 100).unwrap();
        assert!(store.is_loaded());
        let response = store.alter(&upsert("alice")).unwrap();
        assert_eq!(response.results[0].error_code, 0);
        assert!(bool::from(
            store
                .snapshot()
                .lookup("alice", ScramMechanism::Sha256)
                .known
        ));
        let secret = *store.snapshot().table().secret();
        drop(store);
        let reopened = CredentialStore::open_file(dir.path(), 100).unwrap();
        assert!(reopened
            .snapshot()
            .table()
            .get("alice", ScramMechanism::Sha256)
            .is_some());
        assert_eq!(reopened.snapshot().table().secret(), &secret);
        let described = reopened
            .describe(&DescribeUserScramCredentialsRequest::default())
            .unwrap();
        assert_eq!(described.results.len(), 1);
    }

    #[test]
    fn install_keeps_the_newest_version() {
        let store = CredentialStore::in_memory(CredentialTable::with_secret([0; 32]), 10);
        let mut newer = CredentialTable::with_secret([0; 32]);
        newer.insert(
            "a",
            ScramMechanism::Sha256,
            crate::auth::credentials::ScramCredential::from_salted_password(
                ScramMechanism::Sha256,
                b"s",
                &[0; 32],
                4096,
            ),
        );
        assert!(store.install(newer.clone(), 5));
        assert!(!store.install(CredentialTable::with_secret([0; 32]), 4));
        assert_eq!(store.snapshot().table(), &newer);
    }
}
