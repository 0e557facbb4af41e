//! The byte format of a transactional id's durable record ([`TxnMetadata`]) in the
//! store ([`super::store`]).
//!
//! Version 1, big-endian: `u8` version; the transactional id (`u16` length, UTF-8);
//! producer id `i64`, epoch `i16`; last producer id `i64`, epoch `i16`; timeout ms
//! `i32`; state `u8` (0 Empty … 5 CompleteAbort, the order of [`TxnState::ALL`]);
//! start ms `i64`; last update ms `i64`; timed out `u8`; the partitions (`u32` count,
//! each a topic as `u16`-length string and an `i32` partition); the groups (`u32` count,
//! each a `u16`-length group id and its staged offsets: `u32` count, each a topic,
//! `i32` partition, `i64` offset, `u32`-length metadata, `i64` commit time ms).
//! Decoding bounds every length and count by the bytes that remain, so a damaged record
//! is an error, never a large allocation.
//!
//! Version 2 adds one field after the groups: ever opened `u8` (whether the id has
//! opened a transaction, [`TxnMetadata::ever_opened`]). A record is written as version 1
//! whenever version 1 implies the same value, so that brokers before version 2 (in a
//! cluster being upgraded, or after a downgrade) still read it: a version 1 record has
//! never opened a transaction exactly when it is Empty with no previous producer (one
//! InitProducerId and nothing since), and has otherwise. Only an id initialised again
//! without ever opening a transaction needs version 2.

use std::collections::{BTreeMap, BTreeSet};

use super::types::{
    ProducerIdEpoch, StagedOffset, TopicPartition, TransactionalId, TxnMetadata, TxnState,
};

/// The format version of records whose `ever_opened` version 1 implies.
const VERSION_1: u8 = 1;
/// The format version with `ever_opened` written.
const VERSION_2: u8 = 2;

/// What a version 1 record's fields say of `ever_opened`: false only for an id that
/// was granted a producer id once and did nothing since (Empty, no previous producer).
/// Conservative for older records: an id re-initialised without a transaction reads
/// as having opened one (it keeps `transactional_id_expiration_ms`).
fn implied_ever_opened(state: TxnState, last_producer: ProducerIdEpoch) -> bool {
    !(state == TxnState::Empty && last_producer.is_none())
}

/// A record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The record ends early or a length or count exceeds what remains.
    #[error("transaction record truncated")]
    Truncated,
    /// A version this broker does not know.
    #[error("transaction record version {0} is not known")]
    Version(u8),
    /// A field holds a value no record has (state, string, id).
    #[error("transaction record field {0} is invalid")]
    Invalid(&'static str),
}

/// Encodes `meta`.
pub fn encode(meta: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let v1 = meta.ever_opened == implied_ever_opened(meta.state, meta.last_producer);
    out.push(if v1 { VERSION_1 } else { VERSION_2 });
    put_str16(&mut out, meta.id.as_str());
    out.extend_from_slice(&meta.producer.id.to_be_bytes());
    out.extend_from_slice(&meta.producer.epoch.to_be_bytes());
    out.extend_from_slice(&meta.last_producer.id.to_be_bytes());
    out.extend_from_slice(&meta.last_producer.epoch.to_be_bytes());
    out.extend_from_slice(&meta.timeout_ms.to_be_bytes());
    out.push(state_code(meta.state));
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.push(u8::from(meta.timed_out));
    out.extend_from_slice(&(meta.partitions.len() as u32).to_be_bytes());
    for p in &meta.partitions {
        put_str16(&mut out, &p.topic);
        out.extend_from_slice(&p.partition.to_be_bytes());
    }
    out.extend_from_slice(&(meta.groups.len() as u32).to_be_bytes());
    for (group, offsets) in &meta.groups {
        put_str16(&mut out, group);
        out.extend_from_slice(&(offsets.len() as u32).to_be_bytes());
        for (p, o) in offsets {
            put_str16(&mut out, &p.topic);
            out.extend_from_slice(&p.partition.to_be_bytes());
            out.extend_from_slice(&o.offset.to_be_bytes());
            out.extend_from_slice(&(o.metadata.len() as u32).to_be_bytes());
            out.extend_from_slice(o.metadata.as_bytes());
            out.extend_from_slice(&o.commit_time_ms.to_be_bytes());
        }
    }
    if !v1 {
        out.push(u8::from(meta.ever_opened));
    }
    out
}

/// Decodes a record written by [`encode`].
///
/// Errors: [`CodecError`].
pub fn decode(bytes: &[u8]) -> Result<TxnMetadata, CodecError> {
    let mut r = Reader(bytes);
    let version = r.u8()?;
    if version != VERSION_1 && version != VERSION_2 {
        return Err(CodecError::Version(version));
    }
    let id = TransactionalId::new(&r.str16()?).ok_or(CodecError::Invalid("transactional id"))?;
    let producer = ProducerIdEpoch {
        id: r.i64()?,
        epoch: r.i16()?,
    };
    let last_producer = ProducerIdEpoch {
        id: r.i64()?,
        epoch: r.i16()?,
    };
    let timeout_ms = r.i32()?;
    let state = *TxnState::ALL
        .get(usize::from(r.u8()?))
        .ok_or(CodecError::Invalid("state"))?;
    let start_ms = r.i64()?;
    let last_update_ms = r.i64()?;
    let timed_out = r.u8()? != 0;
    // Smallest encoded partition: an empty topic name and the index.
    let count = r.count(2 + 4)?;
    let mut partitions = BTreeSet::new();
    for _ in 0..count {
        partitions.insert(TopicPartition {
            topic: r.str16()?,
            partition: r.i32()?,
        });
    }
    let count = r.count(2 + 4)?;
    let mut groups = BTreeMap::new();
    for _ in 0..count {
        let group = r.str16()?;
        let n = r.count(2 + 4 + 8 + 4 + 8)?;
        let mut offsets = BTreeMap::new();
        for _ in 0..n {
            let partition = TopicPartition {
                topic: r.str16()?,
                partition: r.i32()?,
            };
            let offset = r.i64()?;
            let len = r.u32()? as usize;
            let metadata = r.string(len)?;
            let commit_time_ms = r.i64()?;
            offsets.insert(
                partition,
                StagedOffset {
                    offset,
                    metadata,
                    commit_time_ms,
                },
            );
        }
        groups.insert(group, offsets);
    }
    let ever_opened = if version == VERSION_2 {
        r.u8()? != 0
    } else {
        implied_ever_opened(state, last_producer)
    };
    if !r.0.is_empty() {
        return Err(CodecError::Invalid("trailing bytes"));
    }
    Ok(TxnMetadata {
        id,
        producer,
        last_producer,
        timeout_ms,
        state,
        partitions,
        groups,
        start_ms,
        last_update_ms,
        timed_out,
        ever_opened,
    })
}

fn state_code(state: TxnState) -> u8 {
    TxnState::ALL
        .iter()
        .position(|s| *s == state)
        .unwrap_or_default() as u8
}

/// Writes `s` with a `u16` length; longer strings (never produced: ids, topics and
/// group ids are bounded below 32 KiB on the wire) are cut at a character boundary.
pub(crate) fn put_str16(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// A bounded reader over a record's bytes (also used by [`super::marker_queue`]).
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn i16(&mut self) -> Result<i16, CodecError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    pub(crate) fn i32(&mut self) -> Result<i32, CodecError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(crate) fn i64(&mut self) -> Result<i64, CodecError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub(crate) fn string(&mut self, len: usize) -> Result<String, CodecError> {
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| CodecError::Invalid("string"))
    }
    pub(crate) fn str16(&mut self) -> Result<String, CodecError> {
        let len = usize::from(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ));
        self.string(len)
    }
    /// A `u32` count of entries of at least `min_size` bytes each, bounded by what
    /// remains.
    pub(crate) fn count(&mut self, min_size: usize) -> Result<usize, CodecError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.0.len() {
            return Err(CodecError::Truncated);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnMetadata {
        let tp = |t: &str, p| TopicPartition {
            topic: t.into(),
            partition: p,
        };
        TxnMetadata {
            id: TransactionalId::new("app-é-1").unwrap(),
            producer: ProducerIdEpoch { id: 4001, epoch: 7 },
            last_producer: ProducerIdEpoch { id: 4001, epoch: 6 },
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [tp("out", 0), tp("out", 3)].into_iter().collect(),
            groups: [(
                "g".to_owned(),
                [(
                    tp("in", 1),
                    StagedOffset {
                        offset: 42,
                        metadata: "m".into(),
                        commit_time_ms: 1_700_000_000_000,
                    },
                )]
                .into_iter()
                .collect(),
            )]
            .into_iter()
            .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_500,
            timed_out: true,
            ever_opened: true,
        }
    }

    #[test]
    fn round_trips() {
        let meta = sample();
        assert_eq!(decode(&encode(&meta)).unwrap(), meta);
        for state in TxnState::ALL {
            let m = TxnMetadata { state, ..sample() };
            assert_eq!(decode(&encode(&m)).unwrap().state, state);
        }
    }

    /// `ever_opened` round-trips in every state; records whose flag version 1 implies
    /// are written as version 1 (readable by brokers before version 2), the others as
    /// version 2; a version 1 record decodes with the implied flag.
    #[test]
    fn ever_opened_round_trips_and_version_1_is_kept_where_it_suffices() {
        for state in TxnState::ALL {
            for last_producer in [
                ProducerIdEpoch::NONE,
                ProducerIdEpoch { id: 4001, epoch: 6 },
            ] {
                for ever_opened in [false, true] {
                    let m = TxnMetadata {
                        state,
                        last_producer,
                        ever_opened,
                        ..sample()
                    };
                    let bytes = encode(&m);
                    assert_eq!(decode(&bytes).unwrap(), m);
                    let implied = implied_ever_opened(state, last_producer);
                    assert_eq!(bytes[0], if ever_opened == implied { 1 } else { 2 });
                }
            }
        }
        // A version 1 record as the previous release wrote it: a fresh Empty id.
        let fresh = TxnMetadata {
            state: TxnState::Empty,
            last_producer: ProducerIdEpoch::NONE,
            partitions: BTreeSet::new(),
            groups: BTreeMap::new(),
            ever_opened: false,
            ..sample()
        };
        let bytes = encode(&fresh);
        assert_eq!(bytes[0], 1);
        assert!(!decode(&bytes).unwrap().ever_opened);
        let reinit = TxnMetadata {
            last_producer: ProducerIdEpoch { id: 4001, epoch: 6 },
            ..fresh.clone()
        };
        let mut v1 = encode(&TxnMetadata {
            ever_opened: true,
            ..reinit.clone()
        });
        assert_eq!(v1[0], 1);
        assert!(
            decode(&v1).unwrap().ever_opened,
            "conservative: kept 7 days"
        );
        let v2 = encode(&reinit);
        assert_eq!((v2[0], v2.len()), (2, v1.len() + 1));
        v1[0] = 2;
        assert_eq!(decode(&v1), Err(CodecError::Truncated));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes decoded");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer), Err(CodecError::Invalid("trailing bytes")));
    }

    #[test]
    fn a_forged_count_is_refused_without_allocating() {
        let mut bytes = encode(&TxnMetadata {
            partitions: BTreeSet::new(),
            groups: BTreeMap::new(),
            ..sample()
        });
        // The partition count is 8 bytes from the end (two u32 counts).
        let at = bytes.len() - 8;
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&bytes), Err(CodecError::Truncated));
        let mut bad_version = encode(&sample());
        bad_version[0] = 9;
        assert_eq!(decode(&bad_version), Err(CodecError::Version(9)));
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = decode(&data);
        }
    }
}
