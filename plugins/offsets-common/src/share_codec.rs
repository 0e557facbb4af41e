//! The bytes a built-in store keeps for one share-partition state (offset-store ABI
//! 3.2, [`ShareStateRecord`]): the key is the store's own (group, topic, partition),
//! the value this encoding, big-endian:
//!
//! ```text
//! version        u8    1
//! topic_id       16 bytes
//! state_epoch    i32
//! start_offset   i64
//! write_time_ms  i64
//! run count      u32   at most MAX_SHARE_STATE_RUNS
//! runs           (first_offset i64, last_offset i64, state u8, delivery_count u16)*
//! ```

use drover_abi::{PluginError, ShareStateRecord, ShareStateRun, MAX_SHARE_STATE_RUNS};

const VERSION: u8 = 1;
const HEADER: usize = 1 + 16 + 4 + 8 + 8 + 4;
const RUN: usize = 8 + 8 + 1 + 2;

/// Refuses a record a store must not keep: more than [`MAX_SHARE_STATE_RUNS`] runs, a
/// negative partition.
pub fn validate(record: &ShareStateRecord, store: &str) -> Result<(), PluginError> {
    if record.runs.len() > MAX_SHARE_STATE_RUNS {
        return Err(PluginError::invalid_input(format!(
            "offset store `{store}`: share state of `{}` {}-{} has {} runs (at most {MAX_SHARE_STATE_RUNS})",
            record.group,
            record.topic,
            record.partition,
            record.runs.len()
        )));
    }
    if record.partition < 0 {
        return Err(PluginError::invalid_input(format!(
            "offset store `{store}`: share state with partition {}",
            record.partition
        )));
    }
    Ok(())
}

/// The value bytes of `record`.
pub fn encode(record: &ShareStateRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + RUN * record.runs.len());
    out.push(VERSION);
    out.extend_from_slice(&record.topic_id);
    out.extend_from_slice(&record.state_epoch.to_be_bytes());
    out.extend_from_slice(&record.start_offset.to_be_bytes());
    out.extend_from_slice(&record.write_time_ms.to_be_bytes());
    out.extend_from_slice(&(record.runs.len() as u32).to_be_bytes());
    for run in record.runs.iter() {
        out.extend_from_slice(&run.first_offset.to_be_bytes());
        out.extend_from_slice(&run.last_offset.to_be_bytes());
        out.push(run.state);
        out.extend_from_slice(&run.delivery_count.to_be_bytes());
    }
    out
}

/// The record of `group`/`topic`/`partition` whose value is `bytes`; `None` when the
/// bytes are not this encoding.
pub fn decode(group: &str, topic: &str, partition: i32, bytes: &[u8]) -> Option<ShareStateRecord> {
    if bytes.len() < HEADER || bytes[0] != VERSION {
        return None;
    }
    let i32_at = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
    let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let count = u32::from_be_bytes(bytes[37..41].try_into().ok()?) as usize;
    if count > MAX_SHARE_STATE_RUNS || bytes.len() != HEADER + count * RUN {
        return None;
    }
    let runs = (0..count)
        .map(|i| {
            let at = HEADER + i * RUN;
            ShareStateRun {
                first_offset: i64_at(at),
                last_offset: i64_at(at + 8),
                state: bytes[at + 16],
                delivery_count: u16::from_be_bytes([bytes[at + 17], bytes[at + 18]]),
            }
        })
        .collect();
    Some(ShareStateRecord {
        group: group.into(),
        topic: topic.into(),
        partition,
        topic_id: bytes[1..17].try_into().ok()?,
        state_epoch: i32_at(17),
        start_offset: i64_at(21),
        runs,
        write_time_ms: i64_at(29),
    })
}

/// What a store answers for a value it cannot decode.
pub fn damaged(store: &str, group: &str, topic: &str, partition: i32) -> PluginError {
    PluginError::new(
        drover_abi::ErrorKind::Internal,
        format!("offset store `{store}`: share state of `{group}` {topic}-{partition} is damaged"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_bytes() {
        let record = ShareStateRecord {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            topic_id: [9; 16],
            state_epoch: 7,
            start_offset: 100,
            runs: vec![
                ShareStateRun {
                    first_offset: 100,
                    last_offset: 104,
                    state: 1,
                    delivery_count: 2,
                },
                ShareStateRun {
                    first_offset: 105,
                    last_offset: 105,
                    state: 2,
                    delivery_count: 1,
                },
            ]
            .into(),
            write_time_ms: 1_700_000_000_000,
        };
        let bytes = encode(&record);
        assert_eq!(decode("g", "t", 3, &bytes), Some(record));
        assert_eq!(decode("g", "t", 3, &bytes[..bytes.len() - 1]), None);
        assert_eq!(decode("g", "t", 3, &[]), None);
        let mut huge = bytes.clone();
        huge[37..41].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode("g", "t", 3, &huge), None);
    }
}
