//! TxnOffsetCommit (API 28) when the coordinator plugin does not serve it: a
//! coordinator built against coordinator ABI 3.3 or earlier cannot stage transactional
//! offsets, so the broker answers every partition COORDINATOR_NOT_AVAILABLE (15), what
//! Kafka answers while no group coordinator can take the request. A coordinator of ABI
//! 3.4 or later gets the request instead (`CoordinatorClient::serves`).

use kafka_protocol::{
    error::ResponseError,
    messages::{
        txn_offset_commit_response::{
            TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
        },
        TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    },
};

use crate::server::reply::Reply;

/// Answers every partition of `request` COORDINATOR_NOT_AVAILABLE. The decoder bounded
/// the topic and partition counts by the frame's size.
pub fn handle(request: TxnOffsetCommitRequest) -> Reply {
    let code = ResponseError::CoordinatorNotAvailable.code();
    let mut response = TxnOffsetCommitResponse::default();
    for t in request.topics {
        let mut topic = TxnOffsetCommitResponseTopic::default();
        topic.name = t.name;
        for p in t.partitions {
            let mut partition = TxnOffsetCommitResponsePartition::default();
            partition.partition_index = p.partition_index;
            partition.error_code = code;
            topic.partitions.push(partition);
        }
        response.topics.push(topic);
    }
    Reply::new(response, code)
}
