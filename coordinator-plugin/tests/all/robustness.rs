//! Property test: arbitrary sequences of well-formed and malformed inputs never make the
//! coordinator panic, its timer never asks to be woken in the past, and every frame it
//! sends is either a coordinator request on a channel or an answer to a request the
//! client sent on that connection. The same in cluster mode, with coordinator slots
//! gained and lost in between.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::BytesMut;
use common::{test_config, TestAssignors};
use drover_abi::assignor::{BrokerContext, PartitionContext, TopicContext};
use drover_abi::std_types::RSome;
use drover_coordinator::{
    ConnId, Coordinator, CoordinatorConfig, Input, OffsetEntry, OpId, Output, StoreError,
};
use drover_coordinator::{PartitionStats, TopicName, TopicPartition};
use drover_protocol as proto;
use drover_protocol::{ApiKey, Direction, NativeRequest, NativeResponse};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Garbage {
        conn: u8,
        bytes: Vec<u8>,
    },
    Register {
        conn: u8,
        consumer: u8,
        st: i32,
        kind: u8,
    },
    Commit {
        conn: u8,
        consumer: u8,
        generation: i32,
        partition: i32,
        offset: i64,
    },
    Fetch {
        conn: u8,
        all: bool,
    },
    Leave {
        conn: u8,
        consumer: u8,
    },
    Answer {
        conn: u8,
        corr_delta: i8,
        error: bool,
        healthy: bool,
    },
    Close {
        conn: u8,
    },
    Advance {
        ms: u16,
    },
    StoreResult {
        ok: bool,
    },
    Topics {
        counts: Vec<u8>,
    },
    /// A partition table from the host: (topic index, partition, leader), partitions
    /// unsorted, repeated, negative or beyond the topic's count.
    Stats {
        entries: Vec<(u8, i32, Option<i32>)>,
    },
    /// Cluster mode: a slot gained or lost (slots 0..3 of 2: one out of range).
    Slot {
        gain: bool,
        slot: u8,
    },
}

/// [`op`], and slot changes.
fn cluster_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => op(),
        1 => (any::<bool>(), 0..3u8).prop_map(|(gain, slot)| Op::Slot { gain, slot }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6u8, proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(conn, bytes)| Op::Garbage { conn, bytes }),
        (
            0..6u8,
            0..4u8,
            prop_oneof![Just(10), Just(300), Just(3_000), any::<i32>()],
            0..4u8
        )
            .prop_map(|(conn, consumer, st, kind)| Op::Register {
                conn,
                consumer,
                st,
                kind
            }),
        (0..6u8, 0..5u8, -2..4i32, -1..5i32, -2..100i64).prop_map(
            |(conn, consumer, generation, partition, offset)| Op::Commit {
                conn,
                consumer,
                generation,
                partition,
                offset
            }
        ),
        (0..6u8, any::<bool>()).prop_map(|(conn, all)| Op::Fetch { conn, all }),
        (0..6u8, 0..5u8).prop_map(|(conn, consumer)| Op::Leave { conn, consumer }),
        (
            0..6u8,
            -1..2i8,
            proptest::bool::weighted(0.1),
            proptest::bool::weighted(0.9)
        )
            .prop_map(|(conn, corr_delta, error, healthy)| Op::Answer {
                conn,
                corr_delta,
                error,
                healthy
            }),
        (0..6u8).prop_map(|conn| Op::Close { conn }),
        (0..2_000u16).prop_map(|ms| Op::Advance { ms }),
        any::<bool>().prop_map(|ok| Op::StoreResult { ok }),
        proptest::collection::vec(0..4u8, 0..3).prop_map(|counts| Op::Topics { counts }),
        proptest::collection::vec((0..3u8, -2..6i32, proptest::option::of(-1..3i32)), 0..8)
            .prop_map(|entries| Op::Stats { entries }),
    ]
}

struct Harness {
    coord: Coordinator,
    now: u64,
    /// Per connection: correlation ids the client used; and the coordinator's requests
    /// on channels (corr, api) not yet answered.
    sent: BTreeMap<u8, BTreeSet<i32>>,
    outstanding: BTreeMap<u8, (i32, ApiKey)>,
    closed: BTreeSet<u8>,
    /// Connections the coordinator declared channels (`Output::ChannelOpened`).
    channels: BTreeSet<u8>,
    ops: VecDeque<(OpId, Option<Vec<TopicPartition>>)>,
    next_corr: i32,
}

impl Harness {
    fn conn(&self, c: u8) -> ConnId {
        ConnId(u64::from(c) + 1)
    }

    fn handle(&mut self, input: Input) -> Result<(), TestCaseError> {
        let outputs = self.coord.handle(self.now, input);
        for out in outputs {
            let pushed = matches!(out, Output::Push { .. });
            match out {
                Output::ChannelOpened { conn } => {
                    self.channels.insert((conn.0 - 1) as u8);
                }
                Output::Answer { conn, bytes } | Output::Push { conn, bytes } => {
                    let c = (conn.0 - 1) as u8;
                    prop_assert!(!self.closed.contains(&c), "frame on a closed connection");
                    if let Ok((h, r)) = proto::decode_request_frame(bytes.clone()) {
                        prop_assert!(pushed, "a coordinator request sent as an Answer");
                        prop_assert!(self.channels.contains(&c), "a Push on a non-channel");
                        prop_assert_eq!(r.api_key().direction(), Direction::CoordinatorToConsumer);
                        prop_assert!(
                            !self.outstanding.contains_key(&c),
                            "two outstanding requests"
                        );
                        self.outstanding.insert(c, (h.correlation_id, r.api_key()));
                    } else {
                        prop_assert!(!pushed, "an answer sent as a Push");
                        let mut b = bytes.clone();
                        let h = proto::ResponseHeader::decode(&mut b)
                            .map_err(|e| TestCaseError::fail(format!("undecodable frame: {e}")))?;
                        prop_assert!(
                            self.sent
                                .get(&c)
                                .is_some_and(|s| s.contains(&h.correlation_id)),
                            "answer to a request never sent"
                        );
                    }
                }
                Output::CloseConnection { conn } => {
                    let c = (conn.0 - 1) as u8;
                    self.channels.remove(&c);
                    self.closed.insert(c);
                    self.outstanding.remove(&c);
                }
                Output::RunAssignor(job) => {
                    prop_assert!(false, "an inline assignor's call handed out: {job:?}");
                }
                Output::CommitOffsets { op, .. } => self.ops.push_back((op, None)),
                Output::FetchOffsets { op, scope, .. } => self.ops.push_back((
                    op,
                    Some(match scope {
                        drover_coordinator::FetchScope::Partitions(p) => p,
                        drover_coordinator::FetchScope::WholeGroup => vec![],
                    }),
                )),
                Output::DeleteOffsets { .. } => {
                    prop_assert!(false, "native requests delete no offsets")
                }
                Output::Event(_)
                | Output::Metric { .. }
                | Output::StageTxnOffsets { .. }
                | Output::TxnCompletionApplied { .. } => {}
            }
        }
        if let Some(t) = self.coord.poll_timeout() {
            prop_assert!(t > self.now, "timer at {t} is not after now {}", self.now);
        }
        Ok(())
    }

    fn request(&mut self, c: u8, request: NativeRequest) -> Result<(), TestCaseError> {
        if self.closed.contains(&c) {
            return Ok(());
        }
        self.next_corr += 1;
        self.sent.entry(c).or_default().insert(self.next_corr);
        let mut buf = BytesMut::new();
        proto::encode_request_frame(&mut buf, self.next_corr, None, &request).unwrap();
        let input = Input::Frame {
            conn: self.conn(c),
            bytes: buf.freeze().slice(4..),
        };
        self.handle(input)
    }

    fn run(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Garbage { conn, bytes } => {
                if !self.closed.contains(&conn) {
                    self.handle(Input::Frame {
                        conn: self.conn(conn),
                        bytes: bytes.into(),
                    })?;
                }
            }
            Op::Register {
                conn,
                consumer,
                st,
                kind,
            } => {
                let subscription = match kind {
                    0 => proto::Subscription::static_topics([("t0", 1), ("t1", 2)]),
                    1 => proto::Subscription::whitelist("t.*", 1),
                    2 => proto::Subscription::blacklist("t0", 1),
                    _ => proto::Subscription::whitelist("(", 1),
                };
                self.request(
                    conn,
                    NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
                        group_id: "g".into(),
                        consumer_id: format!("c{consumer}"),
                        host: String::new(),
                        session_timeout_ms: st,
                        subscription,
                        auto_offset_reset: proto::AutoOffsetReset::LATEST,
                        assignor: None,
                        member: proto::MemberData::default(),
                    }),
                )?;
            }
            Op::Commit {
                conn,
                consumer,
                generation,
                partition,
                offset,
            } => {
                let consumer_id = if consumer == 4 {
                    String::new()
                } else {
                    format!("c{consumer}")
                };
                self.request(
                    conn,
                    NativeRequest::CommitOffset(proto::CommitOffsetRequest {
                        group_id: "g".into(),
                        consumer_id,
                        generation,
                        topics: vec![proto::TopicOffsets {
                            topic: "t0".into(),
                            partitions: vec![proto::PartitionOffset {
                                partition,
                                offset,
                                metadata: None,
                            }],
                        }],
                    }),
                )?;
            }
            Op::Fetch { conn, all } => {
                let topics = (!all).then(|| vec![proto::TopicPartitions::new("t0", vec![0, 1])]);
                self.request(
                    conn,
                    NativeRequest::FetchOffsets(proto::FetchOffsetsRequest {
                        group_id: "g".into(),
                        topics,
                    }),
                )?;
            }
            Op::Leave { conn, consumer } => {
                self.request(
                    conn,
                    NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
                        group_id: "g".into(),
                        consumer_id: format!("c{consumer}"),
                    }),
                )?;
            }
            Op::Answer {
                conn,
                corr_delta,
                error,
                healthy,
            } => {
                let Some((corr, key)) = self.outstanding.get(&conn).copied() else {
                    return Ok(());
                };
                if corr_delta == 0 {
                    self.outstanding.remove(&conn);
                }
                let error_code = if error {
                    proto::ErrorCode::ILLEGAL_GENERATION
                } else {
                    proto::ErrorCode::NONE
                };
                let offsets = vec![proto::TopicOffsets {
                    topic: "t0".into(),
                    partitions: vec![proto::PartitionOffset {
                        partition: 0,
                        offset: 5,
                        metadata: Some("m".into()),
                    }],
                }];
                let response = match key {
                    ApiKey::Heartbeat => NativeResponse::Heartbeat(proto::HeartbeatResponse {
                        error_code,
                        fetchers_healthy: healthy,
                        offsets,
                    }),
                    ApiKey::StopFetcher => {
                        NativeResponse::StopFetcher(proto::StopFetcherResponse {
                            error_code,
                            offsets,
                        })
                    }
                    _ => NativeResponse::StartFetcher(proto::StartFetcherResponse { error_code }),
                };
                let mut buf = BytesMut::new();
                proto::encode_response_frame(&mut buf, corr + i32::from(corr_delta), &response)
                    .unwrap();
                let input = Input::Frame {
                    conn: self.conn(conn),
                    bytes: buf.freeze().slice(4..),
                };
                self.handle(input)?;
            }
            Op::Close { conn } => {
                self.closed.insert(conn);
                self.outstanding.remove(&conn);
                self.handle(Input::ConnectionClosed {
                    conn: self.conn(conn),
                })?;
                // A new connection may reuse the slot in the test; ids stay unique in
                // the coordinator's eyes only if we never reopen it.
            }
            Op::Advance { ms } => {
                self.now += u64::from(ms);
                self.handle(Input::Timer)?;
            }
            Op::StoreResult { ok } => {
                if let Some((op, fetch)) = self.ops.pop_front() {
                    let input = match fetch {
                        None => Input::OffsetsCommitted {
                            op,
                            result: if ok {
                                Ok(())
                            } else {
                                Err(StoreError::unavailable("x"))
                            },
                        },
                        Some(partitions) => Input::OffsetsFetched {
                            op,
                            result: if ok {
                                Ok(partitions
                                    .into_iter()
                                    .map(|tp| OffsetEntry {
                                        group: "g".into(),
                                        tp,
                                        offset: 3,
                                        metadata: None,
                                    })
                                    .collect())
                            } else {
                                Err(StoreError::permanent("x"))
                            },
                        },
                    };
                    self.handle(input)?;
                }
            }
            Op::Topics { counts } => {
                let topics = counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, c)| (TopicName::new(format!("t{i}")), u32::from(*c)))
                    .collect();
                self.handle(Input::TopicsChanged { topics })?;
            }
            Op::Stats { entries } => {
                let mut topics: BTreeMap<u8, Vec<PartitionContext>> = BTreeMap::new();
                for (topic, partition, leader) in entries {
                    let mut p = PartitionContext::unknown(partition);
                    p.leader = leader.into();
                    p.log_end_offset = RSome(i64::from(partition));
                    topics.entry(topic).or_default().push(p);
                }
                let table = topics.into_iter().map(|(t, partitions)| TopicContext {
                    topic: format!("t{t}").into(),
                    partitions: partitions.into(),
                });
                let brokers = [BrokerContext {
                    broker_id: 0,
                    rack: RSome("r".into()),
                }];
                self.handle(Input::PartitionStats(PartitionStats::new(brokers, table)))?;
            }
            Op::Slot { gain, slot } => {
                let slot = u32::from(slot);
                let input = if gain {
                    Input::SlotGained {
                        slot,
                        stopped_ms: 0,
                    }
                } else {
                    Input::SlotLost { slot }
                };
                self.handle(input)?;
                if !self.coord.owns("g") {
                    prop_assert!(self.coord.group_ids().is_empty());
                    prop_assert!(self.outstanding.is_empty(), "a channel left open");
                }
            }
        }
        Ok(())
    }

    fn new(config: CoordinatorConfig) -> Result<Harness, TestCaseError> {
        let mut h = Harness {
            coord: Coordinator::new(config, TestAssignors::default()).unwrap(),
            now: 0,
            sent: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            closed: BTreeSet::new(),
            channels: BTreeSet::new(),
            ops: VecDeque::new(),
            next_corr: 0,
        };
        h.handle(Input::TopicsChanged {
            topics: [(TopicName::new("t0"), 2), (TopicName::new("t1"), 1)]
                .into_iter()
                .collect(),
        })?;
        Ok(h)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_inputs_are_handled(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::new(test_config())?;
        for op in ops {
            h.run(op)?;
        }
    }

    #[test]
    fn arbitrary_inputs_are_handled_in_cluster_mode(
        ops in proptest::collection::vec(cluster_op(), 1..60),
    ) {
        let config = CoordinatorConfig {
            slot_count: Some(2),
            max_session_timeout_ms: 5_000,
            ..test_config()
        };
        let mut h = Harness::new(config)?;
        // Group "g" is in slot coordinator_slot("g", 2); own it from the start.
        h.handle(Input::SlotGained {
            slot: proto::coordinator_slot("g", 2),
            stopped_ms: 0,
        })?;
        for op in ops {
            h.run(op)?;
        }
    }
}
