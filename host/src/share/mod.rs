//! Share-group delivery (KIP-932; issue 31 items 3 and 4): the host's half of share
//! groups. As in Kafka (`SharePartitionManager` and `SharePartition` live with the
//! partition's leader, the group coordinator only does membership), the
//! share-partitions live here beside the partition logs, and ShareFetch and
//! ShareAcknowledge are served without the coordinator (docs/design.md, "Share
//! groups").
//!
//! - [`partitions`]: the share-partitions in memory (each a `drover_share`
//!   state machine), bounded, loaded from and written to the active offset store
//!   ([`crate::offsets::share_state`]).
//! - [`sessions`]: the share-session cache, keyed by group and member id (Kafka's
//!   `ShareSessionCache`), bounded in total and per client address.
//! - [`expiry`]: the timer that ends acquisition locks, so records a member abandoned
//!   become available again.
//! - [`log_read`]: what the log returned, as the state machine's input.
//! - [`store`]: the port share state is written through (the active offset store).
//! - [`metrics`]: share-partitions in `GET /metrics`, per share-partition up to a cap.

pub mod expiry;
pub mod log_read;
pub mod metrics;
pub mod partitions;
pub mod sessions;
pub mod store;

use std::sync::{Arc, Mutex};

use crate::{clock::now_ms, config::ShareSection, server::conn_id::ConnId};

pub use partitions::{ShareKey, SharePartitions};
pub use sessions::ShareSessions;

/// The broker's share-group delivery state: share-partitions and share sessions.
pub struct ShareDelivery {
    /// The share-partitions in memory.
    pub partitions: SharePartitions,
    /// The share sessions.
    pub sessions: Mutex<ShareSessions>,
}

/// What one share group's delivery follows: its group configs
/// ([`crate::broker::group_configs`]: `share.auto.offset.reset`,
/// `share.isolation.level`, `share.record.lock.duration.ms`) over the broker's `[share]`
/// settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSettings {
    /// Where a share-partition with no saved state starts.
    pub reset: drover_share::AutoOffsetReset,
    /// Whether share fetches read committed records only.
    pub read_committed: bool,
    /// How long acquired records stay with their member, in ms (ShareFetch answers it).
    pub lock_duration_ms: u64,
}

impl ShareDelivery {
    /// Share delivery as `config` sets it, with each group's overrides from `configs`,
    /// persisting through `stores` (none: no offset store, share groups are not served).
    pub fn new(
        config: &ShareSection,
        configs: Arc<crate::broker::group_configs::GroupConfigs>,
        stores: Option<Arc<dyn store::ShareStateStore>>,
    ) -> ShareDelivery {
        let defaults = GroupSettings {
            reset: config.reset(),
            read_committed: config.isolation_level == "read_committed",
            lock_duration_ms: config.record_lock_duration_ms,
        };
        ShareDelivery {
            partitions: SharePartitions::new(
                config.limits(),
                partitions::GroupDefaults { defaults, configs },
                config.max_share_partitions,
                stores,
            ),
            sessions: Mutex::new(ShareSessions::new(
                config.max_sessions,
                config.max_sessions_per_client,
                config.session_idle_ms,
            )),
        }
    }

    /// What `group`'s delivery follows now.
    pub fn settings(&self, group: &str) -> GroupSettings {
        self.partitions.settings(group)
    }

    /// The session cache, locked.
    pub fn sessions(&self) -> std::sync::MutexGuard<'_, ShareSessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connection `conn` closed: the share sessions it last used go, and their members'
    /// acquired records are released (written to the offset store on the blocking
    /// pool). A connection that never used one costs a map lookup.
    pub async fn connection_closed(self: &Arc<Self>, conn: ConnId) {
        let gone = self.sessions().drop_connection(conn);
        if gone.is_empty() {
            return;
        }
        let delivery = Arc::clone(self);
        let _ = tokio::task::spawn_blocking(move || {
            let now = now_ms();
            for key in gone {
                delivery
                    .partitions
                    .release_member(&key.group, &key.member, now);
            }
        })
        .await;
    }
}
