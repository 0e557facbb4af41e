//! Unit tests of the transaction state machine.

use super::*;

const LIMITS: Limits = Limits {
    max_timeout_ms: 60_000,
    id_expiration_ms: 1_000_000,
    unused_id_expiration_ms: 100_000,
    max_transactional_ids: 3,
    max_partitions_per_transaction: 2,
    max_groups_per_transaction: 1,
    max_offsets_per_transaction: 2,
};

fn id(s: &str) -> TransactionalId {
    TransactionalId::new(s).unwrap()
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn init(txns: &mut Transactions, name: &str, now: i64, fresh: i64) -> ProducerIdEpoch {
    let request = InitRequest {
        id: id(name),
        timeout_ms: 10_000,
        expected: ProducerIdEpoch::NONE,
    };
    let decision = match txns.init_producer_id(now, &request, None).unwrap() {
        InitDecision::NeedProducerId => txns.init_producer_id(now, &request, Some(fresh)).unwrap(),
        d => d,
    };
    let InitDecision::Grant(meta) = decision else {
        panic!("not granted: {decision:?}");
    };
    let producer = meta.producer;
    txns.apply(meta);
    producer
}

fn caller(name: &str, producer: ProducerIdEpoch) -> Caller {
    Caller {
        id: id(name),
        producer,
    }
}

fn apply(txns: &mut Transactions, meta: Option<TxnMetadata>) {
    txns.apply(meta.expect("a change"));
}

#[test]
fn a_new_id_gets_a_fresh_producer_id_at_epoch_0_and_a_known_one_a_bumped_epoch() {
    let mut txns = Transactions::new(LIMITS);
    assert_eq!(
        init(&mut txns, "a", 1, 100),
        ProducerIdEpoch { id: 100, epoch: 0 }
    );
    assert_eq!(
        init(&mut txns, "a", 2, 999),
        ProducerIdEpoch { id: 100, epoch: 1 }
    );
    let meta = txns.get(&id("a")).unwrap();
    assert_eq!(meta.last_producer, ProducerIdEpoch { id: 100, epoch: 0 });
    assert_eq!(meta.state, TxnState::Empty);
}

#[test]
fn init_with_an_open_transaction_aborts_it_with_a_bumped_epoch() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let change = txns
        .add_partitions(2, &caller("a", p), &[tp("t", 0)])
        .unwrap();
    apply(&mut txns, change);
    let request = InitRequest {
        id: id("a"),
        timeout_ms: 10_000,
        expected: ProducerIdEpoch::NONE,
    };
    let InitDecision::AbortOpen(meta) = txns.init_producer_id(3, &request, None).unwrap() else {
        panic!("no abort");
    };
    assert_eq!(meta.state, TxnState::PrepareAbort);
    assert_eq!(meta.producer, ProducerIdEpoch { id: 100, epoch: 1 });
    txns.apply(meta);
    // While it completes: CONCURRENT_TRANSACTIONS, and the old producer is fenced.
    assert_eq!(
        txns.init_producer_id(4, &request, None),
        Err(TxnError::Concurrent)
    );
    assert_eq!(
        txns.end_txn(4, &caller("a", p), true),
        Err(TxnError::Fenced)
    );
    let done = txns.complete(5, &id("a")).unwrap();
    assert_eq!(done.state, TxnState::CompleteAbort);
    assert!(done.partitions.is_empty());
    txns.apply(done);
    assert_eq!(
        init(&mut txns, "a", 6, 0),
        ProducerIdEpoch { id: 100, epoch: 2 }
    );
}

#[test]
fn kip_360_retries_get_the_same_answer_and_stale_epochs_are_fenced() {
    let mut txns = Transactions::new(LIMITS);
    let p0 = init(&mut txns, "a", 1, 100);
    let with = |expected| InitRequest {
        id: id("a"),
        timeout_ms: 10_000,
        expected,
    };
    let InitDecision::Grant(meta) = txns.init_producer_id(2, &with(p0), None).unwrap() else {
        panic!()
    };
    let p1 = meta.producer;
    assert_eq!(p1.epoch, 1);
    txns.apply(meta);
    // The same request again (its answer was lost): the same id and epoch.
    assert_eq!(
        txns.init_producer_id(3, &with(p0), None),
        Ok(InitDecision::Unchanged(p1))
    );
    // Another producer id entirely: fenced.
    assert_eq!(
        txns.init_producer_id(3, &with(ProducerIdEpoch { id: 7, epoch: 0 }), None),
        Err(TxnError::Fenced)
    );
}

#[test]
fn an_exhausted_epoch_rotates_to_a_new_producer_id() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let mut meta = txns.get(&id("a")).unwrap().clone();
    meta.producer.epoch = i16::MAX - 1;
    txns.apply(meta);
    let request = InitRequest {
        id: id("a"),
        timeout_ms: 10_000,
        expected: ProducerIdEpoch::NONE,
    };
    assert_eq!(
        txns.init_producer_id(2, &request, None),
        Ok(InitDecision::NeedProducerId)
    );
    assert_eq!(
        init(&mut txns, "a", 2, 200),
        ProducerIdEpoch { id: 200, epoch: 0 }
    );
    assert!(txns.by_producer_id(p.id).is_none());
    assert_eq!(txns.by_producer_id(200).unwrap().id, id("a"));
}

#[test]
fn bad_timeouts_and_too_many_ids_are_refused() {
    let mut txns = Transactions::new(LIMITS);
    for (timeout_ms, ok) in [(0, false), (60_001, false), (60_000, true)] {
        let request = InitRequest {
            id: id("t"),
            timeout_ms,
            expected: ProducerIdEpoch::NONE,
        };
        let result = txns.init_producer_id(1, &request, Some(1));
        assert_eq!(result.is_ok(), ok, "timeout {timeout_ms}");
    }
    for (n, name) in ["a", "b", "c"].into_iter().enumerate() {
        let p = init(&mut txns, name, 1, n as i64);
        let change = txns.add_partitions(1, &caller(name, p), &[tp("t", 0)]);
        apply(&mut txns, change.unwrap());
    }
    // Every id has a transaction open: nothing can make room.
    let request = InitRequest {
        id: id("d"),
        timeout_ms: 1000,
        expected: ProducerIdEpoch::NONE,
    };
    assert_eq!(txns.evictable(), None);
    assert_eq!(
        txns.init_producer_id(1, &request, Some(9)),
        Err(TxnError::TooManyIds)
    );
    // A known id still gets its (open transaction aborted and) epoch bumped.
    let request = InitRequest {
        id: id("a"),
        ..request
    };
    assert!(matches!(
        txns.init_producer_id(2, &request, None),
        Ok(InitDecision::AbortOpen(_))
    ));
}

#[test]
fn add_partitions_checks_producer_epoch_and_bounds() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let stale = ProducerIdEpoch {
        epoch: p.epoch - 1,
        ..p
    };
    assert_eq!(
        txns.add_partitions(2, &caller("a", stale), &[tp("t", 0)]),
        Err(TxnError::Fenced)
    );
    assert_eq!(
        txns.add_partitions(
            2,
            &caller("a", ProducerIdEpoch { id: 5, epoch: 0 }),
            &[tp("t", 0)]
        ),
        Err(TxnError::UnknownMapping)
    );
    assert_eq!(
        txns.add_partitions(2, &caller("nobody", p), &[tp("t", 0)]),
        Err(TxnError::UnknownMapping)
    );
    let meta = txns
        .add_partitions(2, &caller("a", p), &[tp("t", 0)])
        .unwrap()
        .unwrap();
    assert_eq!((meta.state, meta.start_ms), (TxnState::Ongoing, 2));
    txns.apply(meta);
    // Already there: nothing to write; the start time stays.
    assert_eq!(
        txns.add_partitions(3, &caller("a", p), &[tp("t", 0)]),
        Ok(None)
    );
    assert_eq!(
        txns.add_partitions(3, &caller("a", p), &[tp("t", 1), tp("t", 2)]),
        Err(TxnError::TooLarge)
    );
    assert_eq!(txns.verify_partition(p, &tp("t", 0)), Ok(()));
    assert_eq!(
        txns.verify_partition(p, &tp("t", 1)),
        Err(TxnError::InvalidState)
    );
    assert_eq!(
        txns.verify_partition(stale, &tp("t", 0)),
        Err(TxnError::Fenced)
    );
}

#[test]
fn end_txn_follows_kafkas_state_rules() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let c = caller("a", p);
    assert_eq!(txns.end_txn(2, &c, true), Err(TxnError::InvalidState));
    let change = txns.add_partitions(2, &c, &[tp("t", 0)]).unwrap();
    apply(&mut txns, change);
    let prepared = txns.end_txn(3, &c, true).unwrap().unwrap();
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    txns.apply(prepared);
    assert_eq!(txns.end_txn(4, &c, true), Err(TxnError::Concurrent));
    // An abort of a transaction being committed: Kafka's INVALID_TXN_STATE.
    assert_eq!(txns.end_txn(4, &c, false), Err(TxnError::InvalidState));
    let change = txns.complete(5, &id("a"));
    apply(&mut txns, change);
    // A retried commit succeeds without a change; an abort of the committed data is
    // INVALID_TXN_STATE (outside the librdkafka case, `abort_right_after_a_commit_...`).
    assert_eq!(txns.end_txn(6, &c, true), Ok(None));
    assert_eq!(txns.end_txn(6, &c, false), Err(TxnError::InvalidState));
    assert_eq!(txns.get(&id("a")).unwrap().state, TxnState::CompleteCommit);
    // The next transaction starts afresh.
    let next = txns.add_partitions(7, &c, &[tp("u", 0)]).unwrap().unwrap();
    assert_eq!(next.partitions.len(), 1);
    assert_eq!(next.start_ms, 7);
}

#[test]
fn offsets_are_staged_only_for_a_group_added_to_the_open_transaction() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let c = caller("a", p);
    let offset = |o| StagedOffset {
        offset: o,
        metadata: String::new(),
        commit_time_ms: 1,
    };
    assert_eq!(
        txns.stage_offsets(2, p, "g", &[(tp("in", 0), offset(1))]),
        Err(TxnError::InvalidState)
    );
    let change = txns.add_offsets(2, &c, "g").unwrap();
    apply(&mut txns, change);
    assert_eq!(txns.add_offsets(2, &c, "h"), Err(TxnError::TooLarge));
    let stale = ProducerIdEpoch { epoch: 5, ..p };
    assert_eq!(
        txns.stage_offsets(3, stale, "g", &[(tp("in", 0), offset(1))]),
        Err(TxnError::Fenced)
    );
    let meta = txns
        .stage_offsets(
            3,
            p,
            "g",
            &[(tp("in", 0), offset(1)), (tp("in", 0), offset(2))],
        )
        .unwrap();
    assert_eq!(meta.groups["g"][&tp("in", 0)].offset, 2);
    txns.apply(meta);
    assert_eq!(
        txns.stage_offsets(
            3,
            p,
            "g",
            &[(tp("in", 1), offset(1)), (tp("in", 2), offset(1))]
        ),
        Err(TxnError::TooLarge)
    );
}

#[test]
fn timeouts_abort_with_a_bumped_epoch_and_idle_ids_expire() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 0, 100);
    init(&mut txns, "b", 0, 101);
    let change = txns
        .add_partitions(1_000, &caller("a", p), &[tp("t", 0)])
        .unwrap();
    apply(&mut txns, change);
    assert!(txns.timed_out(10_999).is_empty());
    let aborted = txns.timed_out(11_000);
    assert_eq!(aborted.len(), 1);
    assert_eq!(aborted[0].state, TxnState::PrepareAbort);
    assert_eq!(aborted[0].producer.epoch, p.epoch + 1);
    assert!(aborted[0].timed_out);
    txns.apply(aborted[0].clone());
    assert_eq!(
        txns.end_txn(11_001, &caller("a", p), true),
        Err(TxnError::Fenced)
    );
    // "b" is idle since 0; "a" is being completed and does not expire.
    assert_eq!(txns.expired(1_000_000), vec![id("b")]);
    txns.remove(&id("b"));
    assert!(txns.by_producer_id(101).is_none());
    assert_eq!(txns.preparing(), vec![id("a")]);
}

/// librdkafka's abort_transaction() right after produce(), just after a commit: its
/// AddPartitionsToTxn is refused CONCURRENT_TRANSACTIONS while the commit is
/// PrepareCommit, the abort purges the retry, and EndTxn(abort) arrives once the commit
/// is CompleteCommit. Before the fix this was INVALID_TXN_STATE (fatal in the client).
#[test]
fn abort_right_after_a_commit_whose_add_partitions_was_refused_succeeds_writing_nothing() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let c = caller("a", p);
    let change = txns.add_partitions(2, &c, &[tp("t", 0)]).unwrap();
    apply(&mut txns, change);
    let change = txns.end_txn(3, &c, true).unwrap();
    apply(&mut txns, change);
    // The next transaction's AddPartitionsToTxn while the commit completes, refused
    // and recorded as such (the coordinator does, for every refusal).
    assert_eq!(
        txns.add_partitions(4, &c, &[tp("t", 1)]),
        Err(TxnError::Concurrent)
    );
    txns.note_refused(&c);
    // An abort before the commit completed: retriable.
    assert_eq!(txns.end_txn(4, &c, false), Err(TxnError::Concurrent));
    let change = txns.complete(5, &id("a"));
    apply(&mut txns, change);
    // The abort: success, nothing to write, the commit stays committed.
    assert_eq!(txns.end_txn(6, &c, false), Ok(None));
    let meta = txns.get(&id("a")).unwrap();
    assert_eq!(meta.state, TxnState::CompleteCommit);
    assert!(meta.partitions.is_empty());
    // Produce verification still refuses the never-added partition.
    assert_eq!(
        txns.verify_partition(p, &tp("t", 1)),
        Err(TxnError::InvalidState)
    );
    // A fenced or unknown producer is still refused.
    let old = ProducerIdEpoch {
        id: p.id,
        epoch: p.epoch - 1,
    };
    if p.epoch > 0 {
        assert_eq!(
            txns.end_txn(6, &caller("a", old), false),
            Err(TxnError::Fenced)
        );
    }
    // The next transaction opens normally.
    let next = txns.add_partitions(7, &c, &[tp("t", 2)]).unwrap().unwrap();
    assert_eq!(next.state, TxnState::Ongoing);
    txns.apply(next);
    // It commits; no refusal this time, so an abort after it is INVALID_TXN_STATE: a
    // transaction opened since the refusal, which no longer counts.
    let change = txns.end_txn(8, &c, true).unwrap();
    apply(&mut txns, change);
    let change = txns.complete(9, &id("a"));
    apply(&mut txns, change);
    assert_eq!(txns.end_txn(10, &c, false), Err(TxnError::InvalidState));
}

/// The librdkafka deviation needs the refusal of *this* producer while the previous
/// transaction was PrepareCommit: a refusal in another state or of a fenced epoch does
/// not count, and a new InitProducerId ends it.
#[test]
fn the_abort_deviation_applies_only_after_this_producers_refusal_in_prepare_commit() {
    let mut txns = Transactions::new(LIMITS);
    let p = init(&mut txns, "a", 1, 100);
    let c = caller("a", p);
    let commit = |txns: &mut Transactions, now: i64| {
        let change = txns.add_partitions(now, &c, &[tp("t", 0)]).unwrap();
        apply(txns, change);
        let change = txns.end_txn(now, &c, true).unwrap();
        apply(txns, change);
    };
    commit(&mut txns, 2);
    // A refusal noted for a stale epoch does not count.
    txns.note_refused(&caller("a", ProducerIdEpoch { epoch: 7, ..p }));
    let change = txns.complete(3, &id("a"));
    apply(&mut txns, change);
    assert_eq!(txns.end_txn(4, &c, false), Err(TxnError::InvalidState));
    // A refusal noted in CompleteCommit (not PrepareCommit) does not count either.
    txns.note_refused(&c);
    assert_eq!(txns.end_txn(4, &c, false), Err(TxnError::InvalidState));
    // Refused in PrepareCommit: the deviation applies...
    commit(&mut txns, 5);
    txns.note_refused(&c);
    let change = txns.complete(6, &id("a"));
    apply(&mut txns, change);
    assert_eq!(txns.end_txn(7, &c, false), Ok(None));
    // ...until the producer's epoch changes (a new InitProducerId).
    let p2 = init(&mut txns, "a", 8, 0);
    assert_eq!(p2.epoch, p.epoch + 1);
    let meta = txns.get(&id("a")).unwrap().clone();
    let committed = TxnMetadata {
        state: TxnState::CompleteCommit,
        ..meta
    };
    txns.apply(committed);
    assert_eq!(
        txns.end_txn(9, &caller("a", p2), false),
        Err(TxnError::InvalidState)
    );
}

/// Issue 28: ids that only ever called InitProducerId expire after
/// `unused_id_expiration_ms`; ids that opened a transaction keep Kafka's
/// `transactional.id.expiration.ms`, also once idle again after re-initialising.
#[test]
fn ids_that_never_opened_a_transaction_expire_sooner() {
    let mut txns = Transactions::new(LIMITS);
    let unused = init(&mut txns, "unused", 0, 100);
    init(&mut txns, "unused", 10, 0); // re-initialised, still never opened one
    assert!(!txns.get(&id("unused")).unwrap().ever_opened);
    let p = init(&mut txns, "used", 0, 101);
    let change = txns.add_offsets(1, &caller("used", p), "g").unwrap();
    apply(&mut txns, change);
    let change = txns.end_txn(2, &caller("used", p), false).unwrap();
    apply(&mut txns, change);
    let change = txns.complete(3, &id("used"));
    apply(&mut txns, change);
    init(&mut txns, "used", 4, 0);
    let used = txns.get(&id("used")).unwrap();
    assert!(used.ever_opened && used.state == TxnState::Empty);
    assert!(txns.expired(100_009).is_empty());
    assert_eq!(txns.expired(100_010), vec![id("unused")]);
    txns.remove(&id("unused"));
    assert!(txns.by_producer_id(unused.id).is_none());
    assert!(txns.expired(1_000_003).is_empty());
    assert_eq!(txns.expired(1_000_004), vec![id("used")]);
    // The shorter expiry never lengthens Kafka's.
    let mut short = Transactions::new(Limits {
        id_expiration_ms: 50,
        ..LIMITS
    });
    init(&mut short, "x", 0, 1);
    assert_eq!(short.expired(50), vec![id("x")]);
}

/// Issue 28: at `max_transactional_ids` a new id evicts an idle one — first one that
/// never opened a transaction (oldest change first), then the idle id whose last change
/// is oldest — and is refused only when every id has a transaction open.
#[test]
fn a_new_id_at_the_cap_evicts_an_idle_one_never_opened_first() {
    let mut txns = Transactions::new(LIMITS);
    let request = |name: &str| InitRequest {
        id: id(name),
        timeout_ms: 1000,
        expected: ProducerIdEpoch::NONE,
    };
    // "old" committed a transaction long ago; "open" has one open; "storm" never
    // opened one but changed most recently.
    let p = init(&mut txns, "old", 1, 100);
    let change = txns.add_partitions(2, &caller("old", p), &[tp("t", 0)]);
    apply(&mut txns, change.unwrap());
    let change = txns.end_txn(3, &caller("old", p), true);
    apply(&mut txns, change.unwrap());
    let change = txns.complete(4, &id("old"));
    apply(&mut txns, change);
    let q = init(&mut txns, "open", 5, 101);
    let change = txns.add_partitions(6, &caller("open", q), &[tp("t", 1)]);
    apply(&mut txns, change.unwrap());
    init(&mut txns, "storm", 7, 102);
    assert_eq!(txns.len(), 3);

    // The never-opened id goes first, although "old" has been idle longer.
    assert_eq!(
        txns.init_producer_id(8, &request("new1"), None),
        Ok(InitDecision::Evict(id("storm")))
    );
    txns.remove(&id("storm"));
    init(&mut txns, "new1", 8, 103);
    // Now every never-opened id ("new1") is newer... still first.
    assert_eq!(txns.evictable(), Some(id("new1")));
    // Once "new1" opens a transaction, the idle id idle longest goes: "old".
    let r = txns.get(&id("new1")).unwrap().producer;
    let change = txns.add_partitions(9, &caller("new1", r), &[tp("t", 2)]);
    apply(&mut txns, change.unwrap());
    assert_eq!(
        txns.init_producer_id(10, &request("new2"), None),
        Ok(InitDecision::Evict(id("old")))
    );
    txns.remove(&id("old"));
    // With room, the new id is granted; then every id has an open transaction.
    let s = init(&mut txns, "new2", 10, 104);
    let change = txns.add_partitions(11, &caller("new2", s), &[tp("t", 3)]);
    apply(&mut txns, change.unwrap());
    assert_eq!(
        txns.init_producer_id(12, &request("new3"), None),
        Err(TxnError::TooManyIds)
    );
    // A Prepare* id is not idle either; a completed one is.
    let change = txns.end_txn(13, &caller("new2", s), false);
    apply(&mut txns, change.unwrap());
    assert_eq!(
        txns.init_producer_id(14, &request("new3"), None),
        Err(TxnError::TooManyIds)
    );
    let change = txns.complete(15, &id("new2"));
    apply(&mut txns, change);
    assert_eq!(
        txns.init_producer_id(16, &request("new3"), None),
        Ok(InitDecision::Evict(id("new2")))
    );
}
