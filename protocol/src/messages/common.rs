//! Structures shared by several messages.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::limits::{MAX_PARTITIONS_PER_TOPIC, MAX_TOPICS_PER_REQUEST};
use crate::primitives::{
    read_array, read_i32, read_i64, read_nullable_string, read_string, write_array,
    write_nullable_string, write_string,
};

/// Minimum encoded size of a topic entry: STRING length + ARRAY count.
pub(crate) const TOPIC_ENTRY_MIN: usize = 2 + 4;

/// The offset of one partition with its metadata:
/// `partition INT32, offset INT64, metadata NULLABLE_STRING`.
///
/// In Heartbeat and StopFetcher responses this is a *consumed* offset (the next offset
/// the application has not yet received); in CommitOffset it is the offset to commit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionOffset {
    /// Partition index.
    pub partition: i32,
    /// The next offset to consume.
    pub offset: i64,
    /// Application metadata stored with the offset; null for none.
    pub metadata: Option<String>,
}

/// Offsets of partitions of one topic: `topic STRING, partitions ARRAY{PartitionOffset}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicOffsets {
    /// Topic name.
    pub topic: String,
    /// Its partitions' offsets.
    pub partitions: Vec<PartitionOffset>,
}

impl TopicOffsets {
    const PARTITION_MIN: usize = 4 + 8 + 2;

    pub(crate) fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        write_string(buf, &self.topic, "TopicOffsets.topic")?;
        write_array(
            buf,
            &self.partitions,
            "TopicOffsets.partitions",
            MAX_PARTITIONS_PER_TOPIC,
            |buf, p| {
                buf.put_i32(p.partition);
                buf.put_i64(p.offset);
                write_nullable_string(buf, p.metadata.as_deref(), "PartitionOffset.metadata")
            },
        )
    }

    pub(crate) fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(TopicOffsets {
            topic: read_string(buf, "TopicOffsets.topic")?,
            partitions: read_array(
                buf,
                "TopicOffsets.partitions",
                MAX_PARTITIONS_PER_TOPIC,
                Self::PARTITION_MIN,
                |buf| {
                    Ok(PartitionOffset {
                        partition: read_i32(buf, "PartitionOffset.partition")?,
                        offset: read_i64(buf, "PartitionOffset.offset")?,
                        metadata: read_nullable_string(buf, "PartitionOffset.metadata")?,
                    })
                },
            )?,
        })
    }
}

/// Partition indexes of one topic: `topic STRING, partitions ARRAY{INT32}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicPartitions {
    /// Topic name.
    pub topic: String,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

impl TopicPartitions {
    /// Builds a value from a topic name and partition indexes.
    pub fn new(topic: impl Into<String>, partitions: impl Into<Vec<i32>>) -> Self {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.into(),
        }
    }

    pub(crate) fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        write_string(buf, &self.topic, "TopicPartitions.topic")?;
        write_array(
            buf,
            &self.partitions,
            "TopicPartitions.partitions",
            MAX_PARTITIONS_PER_TOPIC,
            |buf, p| {
                buf.put_i32(*p);
                Ok(())
            },
        )
    }

    pub(crate) fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(TopicPartitions {
            topic: read_string(buf, "TopicPartitions.topic")?,
            partitions: read_array(
                buf,
                "TopicPartitions.partitions",
                MAX_PARTITIONS_PER_TOPIC,
                4,
                |buf| read_i32(buf, "TopicPartitions.partitions[]"),
            )?,
        })
    }
}

/// Writes a topic-level array of [`TopicOffsets`].
pub(crate) fn write_topic_offsets(
    buf: &mut BytesMut,
    topics: &[TopicOffsets],
    what: &'static str,
) -> Result<(), EncodeError> {
    write_array(buf, topics, what, MAX_TOPICS_PER_REQUEST, |buf, t| {
        t.encode(buf)
    })
}

/// Reads a topic-level array of [`TopicOffsets`].
pub(crate) fn read_topic_offsets(
    buf: &mut Bytes,
    what: &'static str,
) -> Result<Vec<TopicOffsets>, DecodeError> {
    read_array(
        buf,
        what,
        MAX_TOPICS_PER_REQUEST,
        TOPIC_ENTRY_MIN,
        TopicOffsets::decode,
    )
}
