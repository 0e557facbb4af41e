//! The Kafka error codes the handlers share: the summary code of a response, and the
//! codes for partition log and cluster errors (Kafka error codes are response values,
//! never `Err`).

use kafka_protocol::error::ResponseError;

/// The first non-zero code of `codes`, or 0.
pub fn first_error(codes: impl IntoIterator<Item = i16>) -> i16 {
    codes.into_iter().find(|c| *c != 0).unwrap_or(0)
}

/// The Kafka error for a partition log error.
pub fn log_error(e: &crate::log::LogError) -> ResponseError {
    use kafka_protocol::error::ParseResponseErrorCode;
    e.error_code()
        .err()
        .unwrap_or(ResponseError::UnknownServerError)
}

/// The Kafka error for a refused cluster operation (cluster mode).
pub(crate) fn cluster_refusal(
    e: crate::cluster::ClusterError,
) -> (kafka_protocol::error::ResponseError, String) {
    use crate::cluster::ClusterError;
    use kafka_protocol::error::ResponseError;
    let code = match &e {
        ClusterError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        ClusterError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ClusterError::Unavailable(_) | ClusterError::NoBrokers => ResponseError::RequestTimedOut,
        _ => ResponseError::KafkaStorageError,
    };
    (code, e.to_string())
}
