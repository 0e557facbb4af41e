//! Transactional offset commits (TxnOffsetCommit, coordinator ABI 3.4) against one
//! coordinator on virtual time, with fake Kafka clients, the in-memory offset store and
//! the host's ledger (`kafka::Ledger`): staging, KIP-447 fencing (old generation,
//! unknown member, stale member epoch), commit, abort, OffsetFetch's `require_stable`,
//! restored pending offsets, another epoch of the same producer, the pending bounds and
//! the one commit in flight per group.

use crate::kafka;

use drover_coordinator::{
    CoordinatorConfig, GroupId, Input, OffsetEntry, Output, PendingTxnOffsets, TxnProducer,
};
use kafka::*;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, JoinGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, ProducerId, SyncGroupRequest, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::ResponseError as E;

const P: TxnProducer = TxnProducer { id: 7, epoch: 1 };

/// TxnOffsetCommit of `offsets` for `group` by producer `p`, from member `member` at
/// `generation` (v3+ fields).
fn txn_commit(
    group: &str,
    p: TxnProducer,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> TxnOffsetCommitRequest {
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = s("tx").into();
    r.group_id = s(group).into();
    r.producer_id = ProducerId(p.id);
    r.producer_epoch = p.epoch;
    r.generation_id = generation;
    r.member_id = s(member);
    for (t, part, offset) in offsets {
        let mut pr = TxnOffsetCommitRequestPartition::default();
        pr.partition_index = *part;
        pr.committed_offset = *offset;
        pr.committed_metadata = Some(s("m"));
        match r.topics.iter_mut().find(|x| x.name.as_str() == *t) {
            Some(topic) => topic.partitions.push(pr),
            None => {
                let mut topic = TxnOffsetCommitRequestTopic::default();
                topic.name = s(*t).into();
                topic.partitions.push(pr);
                r.topics.push(topic);
            }
        }
    }
    r
}

fn codes(r: &TxnOffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .collect()
}

/// A simple (generation −1) TxnOffsetCommit v3 by `p`; its answer's codes.
fn stage_simple(
    h: &mut Harness,
    group: &str,
    p: TxnProducer,
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let r = h.admin(3, txn_commit(group, p, "", -1, offsets));
    codes(&r)
}

/// OffsetFetch v7 of `group`'s `orders` partitions 0..3: (offset, error code) each.
fn fetch(h: &mut Harness, group: &str, require_stable: bool) -> Vec<(i64, i16)> {
    let mut r = OffsetFetchRequest::default();
    r.group_id = s(group).into();
    r.require_stable = require_stable;
    let mut t = OffsetFetchRequestTopic::default();
    t.name = s("orders").into();
    t.partition_indexes = vec![0, 1, 2];
    r.topics = Some(vec![t]);
    let answer = h.admin(7, r);
    answer.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect()
}

fn completed(h: &mut Harness, op: u64, p: TxnProducer, committed: bool) {
    h.feed(Input::TxnCompleted {
        op,
        producer: p,
        committed,
    });
}

const UNSTABLE: i16 = 88;

#[test]
fn staged_offsets_are_pending_until_the_transaction_commits() {
    assert_eq!(E::UnstableOffsetCommit.code(), UNSTABLE);
    let mut h = Harness::new();
    h.store.put("g", tp("orders", 1), 5);
    let codes = stage_simple(&mut h, "g", P, &[("orders", 0, 10), ("orders", 1, 11)]);
    assert_eq!(codes, vec![0, 0]);
    assert_eq!(h.ledger.recorded.len(), 1, "recorded before the answer");
    assert_eq!(h.ledger.recorded[0].producer, P);
    assert_eq!(h.ledger.recorded[0].offsets.len(), 2);
    // Not committed yet: the store has nothing new.
    assert_eq!(h.store.get("g", &tp("orders", 0)), None);
    assert_eq!(fetch(&mut h, "g", false), vec![(-1, 0), (5, 0), (-1, 0)]);
    assert_eq!(
        fetch(&mut h, "g", true),
        vec![(-1, UNSTABLE), (-1, UNSTABLE), (-1, 0)],
        "require_stable: the partitions with pending offsets are unstable"
    );

    completed(&mut h, 1, P, true);
    assert_eq!(h.ledger.applied, vec![1]);
    assert_eq!(h.store.get("g", &tp("orders", 0)), Some(10));
    assert_eq!(h.store.get("g", &tp("orders", 1)), Some(11));
    assert_eq!(fetch(&mut h, "g", true), vec![(10, 0), (11, 0), (-1, 0)]);
    // Repeated: nothing pending, acknowledged again.
    completed(&mut h, 2, P, true);
    assert_eq!(h.ledger.applied, vec![1, 2]);
    assert_eq!(
        h.store_ops(|o| matches!(o, Output::CommitOffsets { .. }))
            .len(),
        1
    );
}

#[test]
fn an_aborted_transaction_commits_nothing() {
    let mut h = Harness::new();
    assert_eq!(stage_simple(&mut h, "g", P, &[("orders", 0, 10)]), vec![0]);
    completed(&mut h, 1, P, false);
    assert_eq!(h.ledger.applied, vec![1]);
    assert_eq!(h.store.get("g", &tp("orders", 0)), None);
    assert!(h
        .store_ops(|o| matches!(o, Output::CommitOffsets { .. }))
        .is_empty());
    assert_eq!(fetch(&mut h, "g", true)[0], (-1, 0));
}

#[test]
fn the_ledgers_refusal_is_the_answer_and_nothing_is_pending() {
    let mut h = Harness::new();
    h.ledger.code = E::CoordinatorNotAvailable.code();
    assert_eq!(stage_simple(&mut h, "g", P, &[("orders", 0, 10)]), vec![15]);
    assert_eq!(fetch(&mut h, "g", true)[0], (-1, 0));
    // The answer waits for the ledger.
    h.ledger.code = 0;
    h.ledger.hold = true;
    let conn = h.connect();
    let call = h.send(conn, 3, txn_commit("g", P, "", -1, &[("orders", 0, 10)]));
    assert!(h.waiting(&call));
    h.release_ledger();
    assert_eq!(codes(&h.take(&call)), vec![0]);
}

/// A one-member classic group "c" on orders, Stable at its first generation; returns
/// (member id, generation).
fn classic_member(h: &mut Harness) -> (String, i32) {
    let conn = h.connect();
    let mut join: JoinGroupRequest = join_request("c", "", None, &["orders"], 10_000, 5_000);
    join.protocol_type = s("consumer");
    // v3: no KIP-394 round trip.
    let call = h.send(conn, 3, join);
    h.advance(3_000);
    let r = h.take(&call);
    assert_eq!(r.error_code, 0, "{r:?}");
    let (member, generation) = (r.member_id.to_string(), r.generation_id);
    let mut sync = SyncGroupRequest::default();
    sync.group_id = s("c").into();
    sync.member_id = s(member.clone());
    sync.generation_id = generation;
    let r = h.call(conn, 3, sync);
    assert_eq!(r.error_code, 0, "{r:?}");
    (member, generation)
}

#[test]
fn a_classic_group_fences_old_generations_and_unknown_members() {
    let mut h = Harness::new();
    let (member, generation) = classic_member(&mut h);
    let o = [("orders", 0, 3)];
    let r = h.admin(3, txn_commit("c", P, &member, generation - 1, &o));
    assert_eq!(codes(&r), vec![E::IllegalGeneration.code()]);
    let r = h.admin(3, txn_commit("c", P, "zombie", generation, &o));
    assert_eq!(codes(&r), vec![E::UnknownMemberId.code()]);
    assert!(h.ledger.recorded.is_empty(), "nothing refused is staged");
    let r = h.admin(3, txn_commit("c", P, &member, generation, &o));
    assert_eq!(codes(&r), vec![0]);
    // Before v3 the request carries no member: taken, as Kafka does.
    let r = h.admin(2, txn_commit("c", P, "", -1, &[("orders", 1, 4)]));
    assert_eq!(codes(&r), vec![0]);
    assert_eq!(h.ledger.recorded.len(), 2);
}

#[test]
fn a_kip848_group_fences_a_stale_member_epoch_with_illegal_generation() {
    let mut h = Harness::new();
    let conn = h.connect();
    let member = "5Cq1X3ZpR1mGZtY9rG0y2A";
    let mut join = ConsumerGroupHeartbeatRequest::default();
    join.group_id = s("k").into();
    join.member_id = s(member);
    join.member_epoch = 0;
    join.rebalance_timeout_ms = 5_000;
    join.subscribed_topic_names = Some(vec![s("orders").into()]);
    join.topic_partitions = Some(Vec::new());
    let r = h.call(conn, 1, join);
    assert_eq!(r.error_code, 0, "{r:?}");
    let epoch = r.member_epoch;
    let o = [("orders", 0, 3)];
    let r = h.admin(3, txn_commit("k", P, member, epoch - 1, &o));
    assert_eq!(codes(&r), vec![E::IllegalGeneration.code()]);
    let r = h.admin(3, txn_commit("k", P, "nobody", epoch, &o));
    assert_eq!(codes(&r), vec![E::UnknownMemberId.code()]);
    let r = h.admin(3, txn_commit("k", P, member, epoch, &o));
    assert_eq!(codes(&r), vec![0]);
}

#[test]
fn a_member_commit_to_an_unknown_group_is_illegal_generation() {
    let mut h = Harness::new();
    let r = h.admin(3, txn_commit("nobody", P, "m", 4, &[("orders", 0, 1)]));
    assert_eq!(codes(&r), vec![E::IllegalGeneration.code()]);
    let r = h.admin(3, txn_commit("", P, "", -1, &[("orders", 0, 1)]));
    assert_eq!(codes(&r), vec![E::InvalidGroupId.code()]);
    let r = h.admin(3, txn_commit("g", P, "", -1, &[("nope", 0, 1)]));
    assert_eq!(codes(&r), vec![E::UnknownTopicOrPartition.code()]);
}

#[test]
fn another_epoch_of_the_same_producer_replaces_nothing() {
    let mut h = Harness::new();
    assert_eq!(stage_simple(&mut h, "g", P, &[("orders", 0, 10)]), vec![0]);
    let older = TxnProducer { epoch: 0, ..P };
    let newer = TxnProducer { epoch: 2, ..P };
    assert_eq!(
        stage_simple(&mut h, "g", older, &[("orders", 0, 99)]),
        vec![E::InvalidProducerEpoch.code()]
    );
    assert_eq!(
        stage_simple(&mut h, "g", newer, &[("orders", 0, 99)]),
        vec![E::ConcurrentTransactions.code()]
    );
    // The fenced epoch's transaction is aborted: then the new epoch may stage.
    completed(&mut h, 1, P, false);
    assert_eq!(
        stage_simple(&mut h, "g", newer, &[("orders", 0, 20)]),
        vec![0]
    );
    // A stale outcome (the old epoch) leaves the new transaction's offsets.
    completed(&mut h, 2, P, true);
    assert_eq!(h.store.get("g", &tp("orders", 0)), None);
    completed(&mut h, 3, newer, true);
    assert_eq!(h.store.get("g", &tp("orders", 0)), Some(20));
    assert_eq!(h.ledger.applied, vec![1, 2, 3]);
}

#[test]
fn restored_offsets_are_pending_and_commit_without_staging() {
    let mut h = Harness::new();
    let entry = OffsetEntry {
        group: GroupId::new("g"),
        tp: tp("orders", 2),
        offset: 42,
        metadata: Some("m".into()),
    };
    h.feed(Input::TxnOffsetsPending {
        pending: vec![PendingTxnOffsets {
            group: GroupId::new("g"),
            producer: P,
            offsets: vec![entry],
        }],
    });
    assert_eq!(fetch(&mut h, "g", true)[2], (-1, UNSTABLE));
    completed(&mut h, 9, P, true);
    assert!(h.ledger.recorded.is_empty(), "not staged again");
    assert_eq!(h.store.get("g", &tp("orders", 2)), Some(42));
    assert_eq!(h.ledger.applied, vec![9]);
}

#[test]
fn pending_offsets_are_bounded_per_group_and_in_all() {
    let mut h = Harness::with_config(CoordinatorConfig {
        max_pending_txn_offsets_per_group: 2,
        max_pending_txn_offsets: 3,
        ..config()
    });
    let full = E::CoordinatorLoadInProgress.code();
    assert_eq!(
        stage_simple(
            &mut h,
            "a",
            P,
            &[("orders", 0, 1), ("orders", 1, 1), ("orders", 2, 1)]
        ),
        vec![full; 3]
    );
    assert_eq!(
        stage_simple(&mut h, "a", P, &[("orders", 0, 1), ("orders", 1, 1)]),
        vec![0, 0]
    );
    // The same partitions again take no more room.
    assert_eq!(stage_simple(&mut h, "a", P, &[("orders", 0, 2)]), vec![0]);
    let q = TxnProducer { id: 8, epoch: 0 };
    assert_eq!(
        stage_simple(&mut h, "b", q, &[("orders", 0, 1), ("orders", 1, 1)]),
        vec![full; 2],
        "three in all"
    );
    assert_eq!(stage_simple(&mut h, "b", q, &[("orders", 0, 1)]), vec![0]);
    // P's transaction ends: its room is free again.
    completed(&mut h, 1, P, true);
    assert_eq!(stage_simple(&mut h, "b", q, &[("orders", 1, 1)]), vec![0]);
    let r = TxnProducer { id: 9, epoch: 0 };
    assert_eq!(stage_simple(&mut h, "a", r, &[("orders", 1, 1)]), vec![0]);
}

#[test]
fn a_committed_transaction_waits_for_the_groups_batch_in_flight() {
    let mut h = Harness::new();
    assert_eq!(stage_simple(&mut h, "g", P, &[("orders", 0, 10)]), vec![0]);
    h.store.hold = true;
    let conn = h.connect();
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = s("g").into();
    commit.generation_id_or_member_epoch = -1;
    let mut t =
        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = s("orders").into();
    let mut p =
        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default();
    p.partition_index = 1;
    p.committed_offset = 3;
    t.partitions.push(p);
    commit.topics.push(t);
    let call = h.send(conn, 8, commit);
    completed(&mut h, 1, P, true);
    assert_eq!(
        h.held().len(),
        1,
        "one CommitOffsets of the group in flight"
    );
    assert!(h.ledger.applied.is_empty());
    // Reads go through (only the operations held so far wait).
    h.store.hold = false;
    assert_eq!(
        fetch(&mut h, "g", true)[0].1,
        UNSTABLE,
        "committing: still unstable"
    );
    h.release_store();
    assert_eq!(h.take(&call).topics[0].partitions[0].error_code, 0);
    // Then the transaction's batch, after the first one's result.
    let commits = h.store_ops(|o| matches!(o, Output::CommitOffsets { .. }));
    assert_eq!(commits.len(), 2);
    assert_eq!(h.ledger.applied, vec![1]);
    assert_eq!(h.store.get("g", &tp("orders", 0)), Some(10));
}

#[test]
fn a_failed_store_write_of_a_committed_transaction_is_retried() {
    let mut h = Harness::new();
    assert_eq!(stage_simple(&mut h, "g", P, &[("orders", 0, 10)]), vec![0]);
    h.store.fail_commits = 2;
    completed(&mut h, 1, P, true);
    assert_eq!(h.ledger.applied, vec![1]);
    assert_eq!(h.store.get("g", &tp("orders", 0)), Some(10));
    assert_eq!(
        h.store_ops(|o| matches!(o, Output::CommitOffsets { .. }))
            .len(),
        3
    );
}

#[test]
fn delete_groups_drops_the_groups_pending_offsets() {
    let mut h = Harness::new();
    assert_eq!(stage_simple(&mut h, "g", P, &[("orders", 0, 10)]), vec![0]);
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = vec![s("g").into()];
    let answer = h.admin(2, r);
    assert_eq!(answer.results[0].error_code, 0, "{answer:?}");
    assert_eq!(fetch(&mut h, "g", true)[0], (-1, 0));
    completed(&mut h, 1, P, true);
    assert_eq!(h.store.get("g", &tp("orders", 0)), None);
    assert_eq!(h.ledger.applied, vec![1]);
}
