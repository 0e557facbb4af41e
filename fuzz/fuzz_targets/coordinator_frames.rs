//! Fuzzes the coordinator core with arbitrary request frames of Kafka's group APIs (and
//! the native ones) on a few connections, over virtual time: whatever arrives, the
//! core must not panic (its debug assertions included), must keep `poll_timeout` after
//! `now`, and must send frames only on connections it has not closed. Offset-store
//! operations are answered at once (successfully), so commit, fetch and delete paths
//! run too.
//!
//! Input layout, repeated: one byte of connection and time step, one byte choosing the
//! API key, one byte choosing the version, two bytes of length, then that many bytes of
//! frame after the key and version (correlation id, client id, body).
#![no_main]

use std::collections::{BTreeMap, HashSet};

use bytes::{BufMut, BytesMut};
use drover_coordinator::kafka_wire::{served_versions, KAFKA_GROUP_APIS};
use drover_coordinator::{
    AssignorSet, ConnId, Coordinator, CoordinatorConfig, Input, Output, TopicName,
};
use libfuzzer_sys::fuzz_target;

fn coordinator() -> Coordinator {
    let config = CoordinatorConfig {
        initial_rebalance_delay_ms: 5,
        min_session_timeout_ms: 10,
        ..CoordinatorConfig::default()
    };
    let mut c = Coordinator::new(config, AssignorSet::new()).expect("valid config");
    let topics: BTreeMap<TopicName, u32> = [(TopicName::new("t"), 4), (TopicName::new("u"), 2)]
        .into_iter()
        .collect();
    let ids = topics
        .keys()
        .enumerate()
        .map(|(i, t)| (t.clone(), [i as u8 + 1; 16]))
        .collect();
    c.handle(0, Input::TopicIds { ids });
    c.handle(0, Input::TopicsChanged { topics });
    c
}

fuzz_target!(|data: &[u8]| {
    let mut c = coordinator();
    let mut now = 0u64;
    let mut closed: HashSet<ConnId> = HashSet::new();
    let mut rest = data;
    while rest.len() >= 5 {
        let (conn_time, key_pick, version_pick) = (rest[0], rest[1], rest[2]);
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]])).min(rest.len() - 5);
        let body = &rest[5..5 + len];
        rest = &rest[5 + len..];
        now += u64::from(conn_time >> 2) * 7;
        let conn = ConnId(u64::from(conn_time & 3) + 1);
        // Mostly group APIs; sometimes ApiVersions or a native key.
        let keys: Vec<i16> = KAFKA_GROUP_APIS
            .iter()
            .map(|k| *k as i16)
            .chain([18, 20_000, 20_004])
            .collect();
        let key = keys[usize::from(key_pick) % keys.len()];
        let version = match kafka_protocol::messages::ApiKey::try_from(key) {
            Ok(k) if KAFKA_GROUP_APIS.contains(&k) => {
                let r = served_versions(k);
                r.min + i16::from(version_pick) % (r.max - r.min + 1)
            }
            _ => i16::from(version_pick % 4),
        };
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i16(key);
        frame.put_i16(version);
        frame.put_slice(body);
        if closed.contains(&conn) {
            // A new connection under the same id once the old one is gone.
            closed.remove(&conn);
        }
        let mut inputs = vec![Input::Frame {
            conn,
            bytes: frame.freeze(),
        }];
        if conn_time & 0x80 != 0 {
            inputs.push(Input::Timer);
        }
        while let Some(input) = inputs.pop() {
            for output in c.handle(now, input) {
                match output {
                    Output::Answer { conn, .. }
                    | Output::Push { conn, .. }
                    | Output::ChannelOpened { conn } => {
                        assert!(!closed.contains(&conn), "output on closed {conn}");
                    }
                    Output::CloseConnection { conn } => {
                        closed.insert(conn);
                        inputs.push(Input::ConnectionClosed { conn });
                    }
                    Output::CommitOffsets { op, .. } => {
                        inputs.push(Input::OffsetsCommitted { op, result: Ok(()) })
                    }
                    Output::FetchOffsets { op, .. } => inputs.push(Input::OffsetsFetched {
                        op,
                        result: Ok(Vec::new()),
                    }),
                    Output::DeleteOffsets { op, .. } => {
                        inputs.push(Input::OffsetsDeleted { op, result: Ok(0) })
                    }
                    Output::StageTxnOffsets { op, .. } => {
                        inputs.push(Input::TxnOffsetsStaged { op, result: Ok(()) })
                    }
                    // Run at once, as the broker would on an assignor thread.
                    Output::RunAssignor(job) => inputs.push(Input::AssignorDone {
                        call: job.id(),
                        result: job.run(),
                    }),
                    // No scope is ever sent here, so none is asked for; an answer
                    // would be an empty one.
                    Output::Event(_)
                    | Output::Metric { .. }
                    | Output::WantTopicScope { .. }
                    | Output::TxnCompletionApplied { .. } => {}
                }
            }
        }
        if let Some(t) = c.poll_timeout() {
            assert!(t > now, "poll_timeout {t} not after now {now}");
        }
    }
});
