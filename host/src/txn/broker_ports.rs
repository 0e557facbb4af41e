//! The ports' implementations over this broker ([`super::ports`]).
//!
//! Until the data plane writes control batches, no partition can hold a transactional
//! batch (the log refuses them), so [`LogMarkers`] has nothing to end and writes
//! nothing; until the group coordinator stages transactional offsets, no transaction
//! holds any, so [`CoordinatorOffsets`] has nothing to complete. Both are replaced when
//! the data plane and the group side land (issue 18).

use futures_util::future::BoxFuture;

use super::{
    ports::{CompleteError, GroupOffsetsCompleter, MarkerRequest, MarkerWriter},
    types::{ProducerIdEpoch, TopicPartition},
};

/// Transaction markers in the partition logs.
pub struct LogMarkers;

impl MarkerWriter for LogMarkers {
    fn write_markers(&self, _request: MarkerRequest) -> BoxFuture<'static, Vec<TopicPartition>> {
        Box::pin(async { Vec::new() })
    }
}

/// Transactional offsets in the group coordinator.
pub struct CoordinatorOffsets;

impl GroupOffsetsCompleter for CoordinatorOffsets {
    fn complete(
        &self,
        _producer: ProducerIdEpoch,
        _committed: bool,
    ) -> BoxFuture<'static, Result<(), CompleteError>> {
        Box::pin(async { Ok(()) })
    }
}
