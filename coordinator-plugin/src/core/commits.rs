//! The one offsets path of every group type, after Kafka's `OffsetMetadataManager`: a
//! commit, a native CommitOffset or a Kafka OffsetCommit, is first validated by the
//! group that has its id (`validate_offset_commit` of the native, classic or KIP-848
//! group; with no group, the rules of a simple commit), then goes through the group
//! id's one commit queue ([`CommitQueue`]) to one [`Op::Commit`], whose result answers
//! the waiters of whichever protocol sent them ([`CommitWaiter`]).
//!
//! Two sources feed a group id's queue: the native group's pending batch (merged, with
//! the non-regression rules of `offsets`) and commits sent as they came (Kafka
//! OffsetCommit requests, queued in order while a batch is out). Whichever sent it, at
//! most one `CommitOffsets` per group id is in flight: the ABI's promise to the host
//! (`io.rs`), which the store's per-group ordering relies on.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::ResponseKind;
use kafka_protocol::ResponseError;

use super::groups::Group;
use super::kafka::{ClassicGroup, CommitWait};
use super::native::{Member, NativeGroup, Waiter};
use super::{Coordinator, Ctx, Op};
use crate::io::Output;
use crate::types::{GroupId, OffsetEntry, OpId, StoreError, TopicName};

/// Who waits for a commit batch: answered with its result, in their protocol.
#[derive(Debug)]
pub(crate) enum CommitWaiter {
    /// A native CommitOffset request.
    Native(Waiter),
    /// A Kafka OffsetCommit request.
    Kafka(CommitWait),
    /// A committed transaction's offsets of the group (`TxnCompleted`).
    Txn(TxnCommitWait),
}

/// A commit sent as it came, queued while a batch of its group id is in flight.
#[derive(Debug)]
pub(crate) enum Queued {
    /// A Kafka OffsetCommit request.
    Kafka(CommitWait),
    /// A committed transaction's offsets of the group.
    Txn(TxnCommitWait),
}

impl Queued {
    fn records(&self) -> &[OffsetEntry] {
        match self {
            Queued::Kafka(w) => &w.records,
            Queued::Txn(w) => &w.records,
        }
    }

    fn waiter(self) -> CommitWaiter {
        match self {
            Queued::Kafka(w) => CommitWaiter::Kafka(w),
            Queued::Txn(w) => CommitWaiter::Txn(w),
        }
    }
}

/// One group's offsets of a committed transaction, on their way to the store: part of
/// the host's `TxnCompleted` `completion`, acknowledged once every part is durable.
#[derive(Debug, Clone)]
pub(crate) struct TxnCommitWait {
    /// The host's id of the `TxnCompleted`.
    pub completion: u64,
    /// The offsets, of one group.
    pub records: Vec<OffsetEntry>,
}

/// What a commit batch is, which decides what its result does besides answering its
/// waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchSource {
    /// The native group's pending batch: a failure goes back to the group (retried, or
    /// forgotten so the next Heartbeat carries it again).
    NativeGroup,
    /// Commits queued as they came (Kafka OffsetCommit, a committed transaction's
    /// offsets): only answered. A simple commit to a group id no group has leaves an
    /// empty classic group once durable.
    Queue,
    /// A native group's batch whose group was dropped with its slot: only answered.
    Dropped,
}

/// Per group id, the one commit batch in flight and the commits waiting behind it.
#[derive(Debug, Default)]
pub(crate) struct CommitQueue {
    in_flight: BTreeMap<GroupId, OpId>,
    queued: BTreeMap<GroupId, Vec<Queued>>,
}

impl CommitQueue {
    /// Whether a batch of `group` is in flight (then another one waits).
    pub(crate) fn busy(&self, group: &GroupId) -> bool {
        self.in_flight.contains_key(group)
    }

    /// The result of batch `op` of `group` arrived: the group id may send its next one.
    fn release(&mut self, group: &GroupId, op: OpId) {
        if self.in_flight.get(group) == Some(&op) {
            self.in_flight.remove(group);
        }
    }

    /// Topics `lost` are gone (deleted, or re-created with a new id): queued commits
    /// lose their entries for them ([`CommitWait::forget_topics`]). Returns the
    /// commits left with nothing to write, to answer now.
    fn forget_topics(&mut self, lost: &BTreeSet<TopicName>) -> Vec<Queued> {
        let mut answered = Vec::new();
        for waits in self.queued.values_mut() {
            for w in waits.iter_mut() {
                match w {
                    Queued::Kafka(w) => w.forget_topics(lost),
                    Queued::Txn(w) => w.records.retain(|r| !lost.contains(&r.tp.topic)),
                }
            }
            let (empty, keep): (Vec<Queued>, Vec<Queued>) = std::mem::take(waits)
                .into_iter()
                .partition(|w| w.records().is_empty());
            *waits = keep;
            answered.extend(empty);
        }
        self.queued.retain(|_, waits| !waits.is_empty());
        answered
    }
}

impl Ctx {
    /// Hands one batch of `group` to the store ([`Output::CommitOffsets`]) and returns
    /// its operation; the caller checked that none is in flight ([`CommitQueue::busy`]).
    pub(crate) fn send_commit(
        &mut self,
        group: GroupId,
        records: Vec<OffsetEntry>,
        waiters: Vec<CommitWaiter>,
        source: BatchSource,
    ) -> OpId {
        let op = self.next_op();
        self.send_commit_as(op, group, records, waiters, source)
    }

    /// [`Ctx::send_commit`] as operation `op`, an id taken when the batch was decided.
    pub(crate) fn send_commit_as(
        &mut self,
        op: OpId,
        group: GroupId,
        records: Vec<OffsetEntry>,
        waiters: Vec<CommitWaiter>,
        source: BatchSource,
    ) -> OpId {
        debug_assert!(
            !self.commits.busy(&group),
            "two commits of {group} in flight"
        );
        self.commits.in_flight.insert(group.clone(), op);
        self.add_op_as(
            op,
            Op::Commit {
                group,
                records: records.clone(),
                waiters,
                source,
            },
        );
        self.output(Output::CommitOffsets { op, records });
        op
    }

    /// Answers the waiters of a batch: `failed`, every entry that waited for the store
    /// gets COORDINATOR_NOT_AVAILABLE (retriable), in either protocol.
    pub(crate) fn answer_commit_waiters(&mut self, waiters: Vec<CommitWaiter>, failed: bool) {
        for w in waiters {
            match w {
                CommitWaiter::Native(w) => {
                    self.answer_waiter(w, failed.then_some(ResponseError::CoordinatorNotAvailable));
                }
                CommitWaiter::Kafka(mut w) => {
                    if failed {
                        w.fail(ResponseError::CoordinatorNotAvailable);
                    }
                    self.respond_kafka(w.slot, w.to, ResponseKind::OffsetCommit(w.response));
                }
                CommitWaiter::Txn(w) => {
                    // Only queued batches carry them, and their results take them out
                    // first (`Coordinator::on_commit_result`).
                    debug_assert!(false, "a transaction's commit answered as a request");
                    tracing::error!(completion = w.completion, "transactional commit dropped");
                }
            }
        }
    }
}

impl Coordinator {
    /// Queues validated commits of `group` that are sent as they came (a Kafka
    /// OffsetCommit with accepted entries): sent now if no batch of the group id is in
    /// flight, else after it.
    pub(crate) fn queue_commit(&mut self, group: GroupId, wait: Queued) {
        if self.cx.commits.busy(&group) {
            self.cx.commits.queued.entry(group).or_default().push(wait);
        } else {
            self.send_queued(group, vec![wait]);
        }
    }

    fn send_queued(&mut self, group: GroupId, waits: Vec<Queued>) {
        let records: Vec<OffsetEntry> = waits.iter().flat_map(|w| w.records().to_vec()).collect();
        let waiters = waits.into_iter().map(Queued::waiter).collect();
        self.cx
            .send_commit(group, records, waiters, BatchSource::Queue);
    }

    /// Sends the commits queued for `group` as one batch, unless a batch of the group
    /// id is in flight.
    fn send_queued_commits(&mut self, group: &GroupId) {
        if self.cx.commits.busy(group) {
            return;
        }
        if let Some(next) = self.cx.commits.queued.remove(group) {
            self.send_queued(group.clone(), next);
        }
    }

    /// Cluster mode: the group ids for which `lost` is true are no longer ours (their
    /// slot was lost, docs/protocol.md §6.8). Their Kafka commits queued behind a batch
    /// in flight are not written (a broker that no longer owns the slot must not write
    /// them): each is answered NOT_COORDINATOR for its accepted partitions, as a native
    /// CommitOffset request waiting in the same slot is. A batch already handed to the
    /// store still answers its waiters with its outcome.
    pub(crate) fn drop_queued_commits_of(&mut self, lost: impl Fn(&GroupId) -> bool) {
        let groups: Vec<GroupId> = self
            .cx
            .commits
            .queued
            .keys()
            .filter(|g| lost(g))
            .cloned()
            .collect();
        for group in groups {
            let waits = self.cx.commits.queued.remove(&group).unwrap_or_default();
            tracing::debug!(%group, commits = waits.len(), "queued commits dropped with their slot");
            for w in waits {
                match w {
                    Queued::Kafka(mut w) => {
                        w.fail(ResponseError::NotCoordinator);
                        self.cx
                            .respond_kafka(w.slot, w.to, ResponseKind::OffsetCommit(w.response));
                    }
                    // Not written by a broker that no longer owns the group: its
                    // completion stays unacknowledged here, and the transaction keeps
                    // its offsets for the slot's new owner.
                    Queued::Txn(w) => {
                        self.groups
                            .txn
                            .end_committing(&group, w.records.iter().map(|r| &r.tp));
                        tracing::warn!(%group, completion = w.completion, "a committed transaction's offsets dropped with their slot");
                    }
                }
            }
        }
    }

    /// Topics `lost` are gone: queued commits drop their entries for them and those
    /// left with nothing to write are answered now.
    pub(crate) fn forget_queued_commits_of(&mut self, lost: &BTreeSet<TopicName>) {
        for w in self.cx.commits.forget_topics(lost) {
            match w {
                Queued::Kafka(w) => {
                    self.cx
                        .respond_kafka(w.slot, w.to, ResponseKind::OffsetCommit(w.response));
                }
                Queued::Txn(w) => self.txn_part_done(w.completion),
            }
        }
    }

    /// The store's answer to batch `op` of `group` ([`Op::Commit`]).
    pub(super) fn on_commit_result(
        &mut self,
        op: OpId,
        group: GroupId,
        records: Vec<OffsetEntry>,
        waiters: Vec<CommitWaiter>,
        source: BatchSource,
        result: Result<(), StoreError>,
    ) {
        self.cx.commits.release(&group, op);
        match source {
            BatchSource::NativeGroup => {
                if let Some(g) = self.groups.native_mut(&group) {
                    self.cx.native(g, |g, env, fx| {
                        g.on_committed(env, fx, op, records, waiters, result);
                    });
                } else {
                    self.cx.answer_commit_waiters(waiters, result.is_err());
                }
                // Commits queued behind the group's batch. (The group sent its own next
                // batch already, if it had one to send now.)
                self.send_queued_commits(&group);
            }
            BatchSource::Dropped => {
                self.send_queued_commits(&group);
                // The batch was handed to the store before the group's slot was lost:
                // the requests that waited for it get its real outcome (NONE only if
                // durable). Nothing else depends on it.
                tracing::debug!(%op, ok = result.is_ok(), "commit result of a group dropped with its slot");
                self.cx.answer_commit_waiters(waiters, result.is_err());
            }
            BatchSource::Queue => {
                let (txn, waiters): (Vec<CommitWaiter>, Vec<CommitWaiter>) = waiters
                    .into_iter()
                    .partition(|w| matches!(w, CommitWaiter::Txn(_)));
                if let Err(e) = &result {
                    tracing::warn!(%group, %op, error = %e, "offset commit failed");
                } else if let Some(g) = self.groups.consumer_mut(&group) {
                    // A KIP-848 group's assignor sees what it committed.
                    g.note_committed(records.iter().map(|r| (&r.tp, r.offset)));
                } else if self.group_kind(group.as_str()).is_none() && self.owns(group.as_str()) {
                    // Kafka keeps a group that only commits (generation −1: the admin
                    // client, manually assigned consumers) as an empty classic group:
                    // ListGroups and DescribeGroups show it. Made once the offsets are
                    // durable, as Kafka makes it in the same write: a failed commit
                    // leaves no group behind.
                    self.groups.insert(
                        group.clone(),
                        Group::Classic(ClassicGroup::new(group.clone())),
                    );
                }
                self.cx.answer_commit_waiters(waiters, result.is_err());
                let mut retry = Vec::new();
                for w in txn {
                    let CommitWaiter::Txn(w) = w else { continue };
                    if result.is_ok() {
                        self.groups
                            .txn
                            .end_committing(&group, w.records.iter().map(|r| &r.tp));
                        self.txn_part_done(w.completion);
                    } else {
                        retry.push(Queued::Txn(w));
                    }
                }
                if !retry.is_empty() {
                    // A committed transaction's offsets are never given up: queued again,
                    // in their order and ahead of what came after them (a later commit of
                    // the same partitions must stay the last written), still unstable for
                    // OffsetFetch meanwhile.
                    let queued = self.cx.commits.queued.entry(group.clone()).or_default();
                    retry.append(queued);
                    *queued = retry;
                }
                if self.cx.commits.queued.contains_key(&group) {
                    self.send_queued_commits(&group);
                } else if let Some(g) = self.groups.native_mut(&group) {
                    // A native group's batch that waited for this one.
                    self.cx.native(g, |g, env, fx| g.flush_commits(env, fx));
                }
            }
        }
    }
}

/// Which API a commit came by: the group rules differ (a Kafka client is never a
/// member of a native group) and so do error codes of an unknown group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitApi {
    /// The native CommitOffset (docs/protocol.md §6.5).
    Native,
    /// Kafka's OffsetCommit at this version.
    Kafka { version: i16 },
    /// Kafka's TxnOffsetCommit (KIP-447 fencing from v3; Kafka's
    /// `validateOffsetCommit(isTransactional = true)`).
    KafkaTxn,
}

impl CommitApi {
    /// Whether the commit is transactional (TxnOffsetCommit).
    pub(crate) fn is_transactional(self) -> bool {
        self == CommitApi::KafkaTxn
    }
}

/// Who asks to commit, as every group type's `validate_offset_commit` sees it (the
/// arguments of Kafka's `Group.validateOffsetCommit`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommitAuthor<'a> {
    /// The member (consumer) id; empty for a simple commit.
    pub member_id: &'a str,
    /// Kafka's `group.instance.id` (static membership), if sent.
    pub instance_id: Option<&'a str>,
    /// The generation (classic, native) or member epoch (KIP-848); negative for a
    /// simple commit.
    pub generation: i32,
    /// The API the commit came by.
    pub api: CommitApi,
}

impl CommitAuthor<'_> {
    /// A commit from outside any membership (the admin client, a reset tool, a
    /// manually assigned consumer): no member id and, natively, generation −1, for Kafka
    /// any negative generation.
    pub(crate) fn is_simple(&self) -> bool {
        self.member_id.is_empty()
            && match self.api {
                CommitApi::Native => self.generation == -1,
                CommitApi::Kafka { .. } | CommitApi::KafkaTxn => self.generation < 0,
            }
    }
}

/// The rules of a commit to a group id that no group has: a simple commit is taken
/// (and, by Kafka's OffsetCommit, leaves an empty classic group once durable); a
/// member's commit is refused with GROUP_ID_NOT_FOUND from OffsetCommit v9 (Kafka 4),
/// ILLEGAL_GENERATION before it and by TxnOffsetCommit, and UNKNOWN_MEMBER_ID natively.
pub(crate) fn validate_commit_without_group(author: &CommitAuthor) -> Result<(), ResponseError> {
    match author.api {
        CommitApi::Native if author.is_simple() => Ok(()),
        CommitApi::Native => Err(ResponseError::UnknownMemberId),
        CommitApi::Kafka { .. } | CommitApi::KafkaTxn if author.generation < 0 => Ok(()),
        CommitApi::KafkaTxn => Err(ResponseError::IllegalGeneration),
        CommitApi::Kafka { version } if version >= 9 => Err(ResponseError::GroupIdNotFound),
        CommitApi::Kafka { .. } => Err(ResponseError::IllegalGeneration),
    }
}

impl Coordinator {
    /// The group-level check of a commit to `group` (Kafka's
    /// `OffsetMetadataManager` asking the group's `validateOffsetCommit`), the one entry
    /// point of both the native CommitOffset and Kafka's OffsetCommit: INVALID_GROUP_ID
    /// for an empty id, NOT_COORDINATOR for a group of a slot not owned; then the group
    /// that has the id decides, whatever its type; with none,
    /// [`validate_commit_without_group`]
    /// ([`Groups::validate_offset_commit`](super::groups::Groups::validate_offset_commit)).
    /// `Ok(Some((group, member)))` for a native member's commit.
    pub(crate) fn validate_offset_commit(
        &self,
        group: &str,
        author: &CommitAuthor,
    ) -> Result<Option<(&NativeGroup, &Member)>, ResponseError> {
        if group.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if !self.owns(group) {
            return Err(ResponseError::NotCoordinator);
        }
        self.groups.validate_offset_commit(group, author)
    }

    /// The group-level check of an offset fetch of `group` by `member` (Kafka's
    /// OffsetFetch v9+ carries the fetching member's id and epoch; `None` before, and
    /// for the native FetchOffsets). Only a KIP-848 group checks the member (Kafka's
    /// `ConsumerGroup.validateOffsetFetch`); any other group, or none, allows it.
    pub(crate) fn validate_offset_fetch(
        &self,
        group: &str,
        member: Option<(Option<&str>, i32)>,
    ) -> Result<(), ResponseError> {
        if group.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if !self.owns(group) {
            return Err(ResponseError::NotCoordinator);
        }
        self.groups.validate_offset_fetch(group, member)
    }
}
