//! The broker's open-file budget: what its descriptor limit (`RLIMIT_NOFILE`) has to
//! cover, and so how many partitions fit under it.
//!
//! ```text
//! descriptors ≈ partitions × 1             the active segment's .log of each partition
//!             + log.open_files_cache       sealed-segment .logs and all index files
//!             + 2 × server.max_connections a socket, and a read in progress
//!             + 256                        listeners, plugins, offset store, transient opens
//! ```
//!
//! The broker refuses to create partitions beyond what this leaves room for
//! ([`crate::broker::TopicError::PartitionLimit`]), so running out of descriptors does
//! not stop accepts, appends or recoveries, and startup logs the numbers
//! ([`DescriptorBudget::log`]).

use crate::config::Config;

/// Descriptors counted for what is neither a partition, the file cache nor a
/// connection: the two listeners, the admin server, plugin libraries and their files
/// (the embedded offset store), logs, and files opened briefly (topic metadata, a new
/// segment's files, directory fsyncs).
pub const RESERVED: u64 = 256;

/// Descriptors counted per connection: its socket, and a file a fetch is reading
/// through a handle the cache may have closed meanwhile.
pub const PER_CONNECTION: u64 = 2;

/// The descriptor limit and what the configuration spends of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// The soft open-file limit; `None` when unlimited.
    pub limit: Option<u64>,
    /// `log.open_files_cache`, at most an eighth of the limit: the capacity the file
    /// cache gets, in files.
    pub open_files_cache: u64,
    /// `server.max_connections`, counted up to a quarter of the limit.
    pub connections: u64,
}

impl DescriptorBudget {
    /// The budget of `config` under the process's current soft limit.
    pub fn current(config: &Config) -> DescriptorBudget {
        DescriptorBudget::with_limit(config, open_file_limit())
    }

    /// The budget of `config` under `limit` (`None`: unlimited). Under a low limit the
    /// fixed part shrinks so that partitions still fit: the file cache gets at most an
    /// eighth of the limit (at least 16 files) and connections are counted up to a
    /// quarter of it (more connections than that can run the broker out of
    /// descriptors; accepts then fail and back off). With a limit of 1024 that leaves
    /// room for 128 partitions instead of none.
    pub fn with_limit(config: &Config, limit: Option<u64>) -> DescriptorBudget {
        let configured_cache = config.log.open_files_cache as u64;
        let connections = config.server.max_connections as u64;
        let (open_files_cache, connections) = match limit {
            None => (configured_cache, connections),
            Some(limit) => (
                configured_cache.min((limit / 8).max(16)),
                connections.min(limit / 4),
            ),
        };
        DescriptorBudget {
            limit,
            open_files_cache,
            connections,
        }
    }

    /// Descriptors spent whatever the number of partitions.
    pub fn fixed(&self) -> u64 {
        self.open_files_cache + PER_CONNECTION * self.connections + RESERVED
    }

    /// The most partitions that fit beside [`Self::fixed`]: `usize::MAX` when the limit
    /// is unlimited, 0 when even the fixed part does not fit.
    pub fn max_partitions(&self) -> usize {
        match self.limit {
            None => usize::MAX,
            Some(limit) => {
                usize::try_from(limit.saturating_sub(self.fixed())).unwrap_or(usize::MAX)
            }
        }
    }

    /// The limit `partitions` partitions need.
    pub fn needed_for(&self, partitions: u64) -> u64 {
        partitions + self.fixed()
    }

    /// Logs the limit and the formula at startup; warns, saying what to change, when a
    /// topic of `max_partitions_per_topic` partitions would not fit.
    pub fn log(&self, max_partitions_per_topic: u32) {
        let Some(limit) = self.limit else {
            tracing::info!("open-file limit: unlimited");
            return;
        };
        let room = self.max_partitions();
        tracing::info!(
            open_files = limit,
            max_partitions = room,
            open_files_cache = self.open_files_cache,
            max_connections = self.connections,
            "open-file limit: room for {room} partitions (one descriptor each, for the \
             active segment) beside {} for the segment file cache, {PER_CONNECTION} per \
             connection and {RESERVED} reserved",
            self.open_files_cache
        );
        if room < max_partitions_per_topic as usize {
            tracing::warn!(
                "the open-file limit ({limit}) leaves room for {room} partitions on this \
                 broker, fewer than topics.max_partitions ({max_partitions_per_topic}); \
                 creating more is refused. Raise the hard limit to at least {} (ulimit -Hn, \
                 systemd LimitNOFILE=), or lower server.max_connections or \
                 log.open_files_cache",
                self.needed_for(u64::from(max_partitions_per_topic))
            );
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, as Kafka's packaging does
/// (idempotent; a failure leaves the limit as it was). Returns the soft limit after,
/// `None` if unlimited or unknown.
pub fn raise_soft_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        }
    }
    open_file_limit()
}

/// The soft `RLIMIT_NOFILE`; `None` if unlimited or unknown.
pub fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed to it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_low_limit_still_leaves_room_for_partitions() {
        let config = Config::parse(Path::new("x"), "").unwrap();
        let budget = DescriptorBudget::with_limit(&config, Some(1024));
        assert_eq!(budget.open_files_cache, 128);
        assert_eq!(budget.connections, 256);
        assert_eq!(budget.max_partitions(), 1024 - 128 - 512 - 256);
        let roomy = DescriptorBudget::with_limit(&config, Some(1 << 20));
        assert_eq!(roomy.open_files_cache, config.log.open_files_cache as u64);
        assert_eq!(roomy.connections, config.server.max_connections as u64);
    }

    #[test]
    fn the_default_partition_limit_fits_under_20000_descriptors() {
        // This sandbox's hard limit, where 10,000 partitions used to fail (3 files each).
        let config = Config::parse(Path::new("x"), "").unwrap();
        let budget = DescriptorBudget::with_limit(&config, Some(20_000));
        assert_eq!(budget.fixed(), 1024 + 2 * 1024 + 256);
        assert!(budget.max_partitions() >= config.topics.max_partitions as usize);
        assert_eq!(
            budget.needed_for(10_000),
            10_000 + budget.fixed(),
            "one descriptor per partition"
        );
    }

    #[test]
    fn a_small_limit_leaves_room_for_what_it_can() {
        let config = Config::parse(
            Path::new("x"),
            "[server]\nmax_connections = 10\n[log]\nopen_files_cache = 20\n",
        )
        .unwrap();
        let budget = DescriptorBudget::with_limit(&config, Some(400));
        assert_eq!(budget.max_partitions(), 400 - (20 + 20 + 256));
        assert_eq!(
            DescriptorBudget::with_limit(&config, Some(100)).max_partitions(),
            0
        );
        assert_eq!(
            DescriptorBudget::with_limit(&config, None).max_partitions(),
            usize::MAX
        );
    }
}
