//! The byte formats of cluster mode's transactional-offset nodes ([`super`]): a
//! staged node ([`StagedNode`], one group's offsets of one producer's open
//! transaction) and an outcome node ([`OutcomeNode`], a transaction's result for one
//! group). Decoding bounds every length and count by the bytes that remain, so a
//! damaged node is an error, never a large allocation.
//!
//! Staged node, version 1, big-endian: `u8` version; transactional id (`u16` length,
//! UTF-8); producer id `i64`, epoch `i16`; group (`u16` length); offsets (`u32` count,
//! each a `u16`-length topic, `i32` partition, `i64` offset, `u32`-length metadata,
//! `i64` commit time ms).
//!
//! Outcome node, version 1: `u8` version; the transaction's coordinator slot `u32`
//! and that slot's coordinator epoch `i32` when the outcome was queued; producer id
//! `i64`, epoch `i16`; `u8` 1 commit / 0 abort; group (`u16` length).

use std::collections::BTreeMap;

use super::super::{
    codec::{put_str16, CodecError, Reader},
    types::{ProducerIdEpoch, StagedOffset, TopicPartition},
};

const VERSION: u8 = 1;

/// One group's offsets staged by one producer's open transaction, kept until the
/// transaction's outcome is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedNode {
    /// The producer's transactional id (whose record the staging was checked against).
    pub transactional_id: String,
    /// The producer id and the epoch of the last staging.
    pub producer: ProducerIdEpoch,
    /// The consumer group.
    pub group: String,
    /// Partition → staged offset; a later staging of a partition replaces it.
    pub offsets: BTreeMap<TopicPartition, StagedOffset>,
}

/// A transaction's outcome for one group, queued by the transaction's coordinator for
/// the owner of the group's slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeNode {
    /// The transactional id's coordinator slot.
    pub txn_slot: u32,
    /// That slot's coordinator epoch when the outcome was queued.
    pub coordinator_epoch: i32,
    /// The producer id and epoch the outcome carries.
    pub producer: ProducerIdEpoch,
    /// Commit (true) or abort.
    pub committed: bool,
    /// The consumer group.
    pub group: String,
}

/// Encodes `node`.
pub fn encode_staged(node: &StagedNode) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 32 * node.offsets.len());
    out.push(VERSION);
    put_str16(&mut out, &node.transactional_id);
    out.extend_from_slice(&node.producer.id.to_be_bytes());
    out.extend_from_slice(&node.producer.epoch.to_be_bytes());
    put_str16(&mut out, &node.group);
    out.extend_from_slice(&(node.offsets.len() as u32).to_be_bytes());
    for (p, o) in &node.offsets {
        put_str16(&mut out, &p.topic);
        out.extend_from_slice(&p.partition.to_be_bytes());
        out.extend_from_slice(&o.offset.to_be_bytes());
        out.extend_from_slice(&(o.metadata.len() as u32).to_be_bytes());
        out.extend_from_slice(o.metadata.as_bytes());
        out.extend_from_slice(&o.commit_time_ms.to_be_bytes());
    }
    out
}

/// Decodes a node written by [`encode_staged`].
///
/// Errors: [`CodecError`].
pub fn decode_staged(bytes: &[u8]) -> Result<StagedNode, CodecError> {
    let mut r = Reader(bytes);
    let version = r.u8()?;
    if version != VERSION {
        return Err(CodecError::Version(version));
    }
    let transactional_id = r.str16()?;
    let producer = ProducerIdEpoch {
        id: r.i64()?,
        epoch: r.i16()?,
    };
    let group = r.str16()?;
    // topic length, partition, offset, metadata length, commit time.
    let count = r.count(2 + 4 + 8 + 4 + 8)?;
    let mut offsets = BTreeMap::new();
    for _ in 0..count {
        let tp = TopicPartition {
            topic: r.str16()?,
            partition: r.i32()?,
        };
        let offset = r.i64()?;
        let len = r.u32()? as usize;
        let metadata = r.string(len)?;
        let commit_time_ms = r.i64()?;
        offsets.insert(
            tp,
            StagedOffset {
                offset,
                metadata,
                commit_time_ms,
            },
        );
    }
    if !r.0.is_empty() {
        return Err(CodecError::Invalid("trailing bytes"));
    }
    Ok(StagedNode {
        transactional_id,
        producer,
        group,
        offsets,
    })
}

/// Encodes `node`.
pub fn encode_outcome(node: &OutcomeNode) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + node.group.len());
    out.push(VERSION);
    out.extend_from_slice(&node.txn_slot.to_be_bytes());
    out.extend_from_slice(&node.coordinator_epoch.to_be_bytes());
    out.extend_from_slice(&node.producer.id.to_be_bytes());
    out.extend_from_slice(&node.producer.epoch.to_be_bytes());
    out.push(u8::from(node.committed));
    put_str16(&mut out, &node.group);
    out
}

/// Decodes a node written by [`encode_outcome`].
///
/// Errors: [`CodecError`].
pub fn decode_outcome(bytes: &[u8]) -> Result<OutcomeNode, CodecError> {
    let mut r = Reader(bytes);
    let version = r.u8()?;
    if version != VERSION {
        return Err(CodecError::Version(version));
    }
    let txn_slot = r.u32()?;
    let coordinator_epoch = r.i32()?;
    let producer = ProducerIdEpoch {
        id: r.i64()?,
        epoch: r.i16()?,
    };
    let committed = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(CodecError::Invalid("outcome result")),
    };
    let group = r.str16()?;
    if !r.0.is_empty() {
        return Err(CodecError::Invalid("trailing bytes"));
    }
    Ok(OutcomeNode {
        txn_slot,
        coordinator_epoch,
        producer,
        committed,
        group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staged() -> StagedNode {
        let mut offsets = BTreeMap::new();
        for p in 0..3 {
            offsets.insert(
                TopicPartition {
                    topic: "in".into(),
                    partition: p,
                },
                StagedOffset {
                    offset: 10 * i64::from(p),
                    metadata: "m".repeat(p as usize),
                    commit_time_ms: 1_700_000_000_000,
                },
            );
        }
        StagedNode {
            transactional_id: "app-1".into(),
            producer: ProducerIdEpoch { id: 7, epoch: 3 },
            group: "g".into(),
            offsets,
        }
    }

    fn outcome() -> OutcomeNode {
        OutcomeNode {
            txn_slot: 5,
            coordinator_epoch: 2,
            producer: ProducerIdEpoch { id: 7, epoch: 3 },
            committed: true,
            group: "g/é".into(),
        }
    }

    #[test]
    fn round_trip_and_every_truncation_is_an_error() {
        let s = encode_staged(&staged());
        assert_eq!(decode_staged(&s).unwrap(), staged());
        for n in 0..s.len() {
            assert!(decode_staged(&s[..n]).is_err(), "staged cut at {n}");
        }
        let o = encode_outcome(&outcome());
        assert_eq!(decode_outcome(&o).unwrap(), outcome());
        for n in 0..o.len() {
            assert!(decode_outcome(&o[..n]).is_err(), "outcome cut at {n}");
        }
    }

    #[test]
    fn a_forged_count_is_refused_without_allocating() {
        let mut s = encode_staged(&StagedNode {
            offsets: BTreeMap::new(),
            ..staged()
        });
        let at = s.len() - 4;
        s[at..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode_staged(&s), Err(CodecError::Truncated));
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = decode_staged(&data);
            let _ = decode_outcome(&data);
        }
    }
}
