//! Where share-partition states are kept: a port the share-partitions write through
//! (implemented by the active offset store, `crate::offsets::share_state`), so this
//! module does not name the offset stores.

use drover_abi::{ShareStateRecord, TopicPartitions};

/// Why share state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ShareStateError {
    /// The active store keeps no share state.
    #[error("the offset store `{0}` keeps no share-group state (it needs offset-store ABI 3.2 and share-state support); share groups are not served")]
    Unsupported(String),
    /// The store failed.
    #[error("share state: {0}")]
    Store(String),
}

/// A store of share-partition states (offset-store ABI 3.2's calls).
pub trait ShareStateStore: Send + Sync {
    /// Durably writes `batch`, all together, each replacing its key's.
    fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), ShareStateError>;
    /// `group`'s states of `partitions`; absent ones are left out.
    fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, ShareStateError>;
}
