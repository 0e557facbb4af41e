//! KIP-848 consumer groups (the "next generation consumer rebalance protocol") as a
//! pure state machine: the group logic behind ConsumerGroupHeartbeat v0–v1 and
//! ConsumerGroupDescribe, and the member checks of OffsetCommit / OffsetFetch v9+,
//! ListGroups and DeleteGroups for these groups.
//!
//! It reads no clock and does no I/O: every call gets an [`Env`] with the current time
//! (monotonic ms), the topic metadata and the assignors. It knows nothing of the wire:
//! the glue decodes the Kafka requests, converts topic ids to names and back, and calls
//! [`ConsumerGroups`]. Deadlines are reported by [`ConsumerGroups::next_deadline`] and
//! acted on by [`ConsumerGroups::expire`].
//!
//! The rules, after KIP-848 and Kafka's group coordinator:
//!
//! - **Epochs.** A group has a *group epoch*, bumped whenever what the assignment depends
//!   on changes: a member joins or is removed, a member's subscription (topic names,
//!   regex) or server assignor changes, or the partition count / existence of a
//!   subscribed topic changes. At each bump the group's server-side assignor computes a
//!   new *target assignment*, whose epoch is the *assignment epoch*. When the assignor
//!   fails (or its output is invalid), the old target, without removed members and
//!   vanished partitions, serves at the new epoch, the group shows as Assigning, and
//!   the assignor is retried at most once per heartbeat interval (on heartbeats and
//!   topic changes); a successful retry bumps the group epoch. Each member has a
//!   *member epoch*: the assignment epoch it has reconciled to.
//! - **Assignor.** Each member may name a server assignor; the group uses the one named
//!   by most members (ties: the smallest name), else the default. A name must be a
//!   loaded assignor; `uniform` (when no assignor of that name is loaded) means our
//!   `sticky`, and `range` our `range`. Any other name that is not loaded runs the
//!   default assignor (with a warning) instead of Kafka's UNSUPPORTED_ASSIGNOR, so a
//!   missing or refused plugin does not fail the group's consumers.
//! - **Reconciliation (revoke, then assign).** On each heartbeat a member moves towards
//!   its target: partitions it holds that are not in its target are revoked first (the
//!   member keeps its epoch and is told its assignment without them, state
//!   `unrevoked_partitions`) until it heartbeats with owned partitions that no longer
//!   include them; only then does it move to the target epoch and receive new
//!   partitions, and only those no other member still holds (assigned or pending
//!   revocation). Partitions still held by others are withheld (state
//!   `unreleased_partitions`) and handed over on a later heartbeat once released. So no
//!   partition is ever held by two members.
//! - **Fencing.** A heartbeat with an epoch newer than the member's, or older and not
//!   the member's previous epoch with owned partitions within its assignment (a lost
//!   response), is FENCED_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID. Epoch 0
//!   (re)joins: an existing member id rejoins idempotently.
//! - **Timeouts.** A member that does not heartbeat for the session timeout is removed;
//!   a member asked to revoke partitions that has not done so within its rebalance
//!   timeout is removed. Removal releases its partitions and bumps the group epoch.
//! - **Leaving.** Epoch −1 leaves (the member is removed). A static member (with an
//!   instance id) leaving with epoch −2 keeps its place and its assignment, without a
//!   group epoch bump, until the session timeout; a member joining with the same
//!   instance id and a new member id then takes over that place and assignment without
//!   disturbing the others. While the old member has not left, such a join is
//!   UNRELEASED_INSTANCE_ID; a request naming the instance id with another member id
//!   than its current one is FENCED_INSTANCE_ID.
//! - **Regex subscriptions** use the Rust `regex` syntax, matched against whole topic
//!   names (internal `__` topics excluded), re-resolved on every topic change. An
//!   invalid pattern is INVALID_REGULAR_EXPRESSION.
//! - **Requests** are validated as Kafka does (INVALID_REQUEST): a join (epoch 0) needs
//!   a rebalance timeout, an empty owned-partitions list and a subscription (names or
//!   regex); a member id is required in v1, on heartbeats with an epoch above 0 and on
//!   leaving; epoch −2 needs an instance id; epochs below −2 are invalid; blank group,
//!   instance and rack ids are invalid. Group size is limited (GROUP_MAX_SIZE_REACHED).
//! - **Offsets** of a consumer group may be committed by a member with its current
//!   epoch (else STALE_MEMBER_EPOCH, or UNKNOWN_MEMBER_ID), or with a negative epoch
//!   while the group has no members (a standalone commit).

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use crate::assignors::{build_input, validate_assignment, Assignors, MemberView};
use crate::subscription::{compile_pattern, is_internal_topic};
use crate::types::{ConsumerId, GroupId, TopicName, TopicPartition};

/// The Kafka error codes this module answers with.
pub(crate) mod codes {
    /// 25: the member id is not in the group.
    pub(crate) const UNKNOWN_MEMBER_ID: i16 = 25;
    /// 42: a malformed request.
    pub(crate) const INVALID_REQUEST: i16 = 42;
    /// 68: DeleteGroups of a group that still has members.
    pub(crate) const NON_EMPTY_GROUP: i16 = 68;
    /// 69: no such (consumer) group.
    pub(crate) const GROUP_ID_NOT_FOUND: i16 = 69;
    /// 81: the group has reached its maximum size.
    pub(crate) const GROUP_MAX_SIZE_REACHED: i16 = 81;
    /// 82: another member id holds this instance id.
    pub(crate) const FENCED_INSTANCE_ID: i16 = 82;
    /// 110: the member epoch is fenced; the member must rejoin with epoch 0.
    pub(crate) const FENCED_MEMBER_EPOCH: i16 = 110;
    /// 111: the instance id is still used by a member that has not left.
    pub(crate) const UNRELEASED_INSTANCE_ID: i16 = 111;
    /// 113: an offset commit or fetch with another epoch than the member's.
    pub(crate) const STALE_MEMBER_EPOCH: i16 = 113;
    /// 128: the subscription regex does not compile (Kafka's code for
    /// INVALID_REGULAR_EXPRESSION).
    pub(crate) const INVALID_REGULAR_EXPRESSION: i16 = 128;
}

/// Longest error message in a ConsumerGroupHeartbeat answer, bytes.
const MAX_ERROR_MESSAGE_BYTES: usize = 512;

/// The member epoch of a (re)joining member.
pub(crate) const JOIN_EPOCH: i32 = 0;
/// The member epoch of a member leaving the group.
pub(crate) const LEAVE_EPOCH: i32 = -1;
/// The member epoch of a static member leaving temporarily.
pub(crate) const STATIC_LEAVE_EPOCH: i32 = -2;
/// The first ConsumerGroupHeartbeat version in which the client generates its member id
/// (KIP-1082): the member id is then required on every request.
pub(crate) const CLIENT_MEMBER_ID_VERSION: i16 = 1;

/// An error answer: a Kafka error code and a message.
type Failure = (i16, String);

/// A target assignment: partitions by member id.
type Target = BTreeMap<String, BTreeSet<TopicPartition>>;

/// What running an assignor gave: its name and the checked target, or its name and
/// what went wrong.
type AssignorRun = Result<(String, Target), (String, String)>;

fn failure(code: i16, message: impl Into<String>) -> Failure {
    (code, message.into())
}

/// A ConsumerGroupHeartbeat request (v0–v1) in domain form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeartbeatRequest {
    /// The request's API version (v1 requires a client-generated member id).
    pub version: i16,
    /// The group.
    pub group: GroupId,
    /// The member id. v1: generated by the client, never empty. v0: empty on the first
    /// join, when the coordinator generates one.
    pub member_id: String,
    /// The static member's instance id (`group.instance.id`).
    pub instance_id: Option<String>,
    /// The member's rack; `None` = unchanged.
    pub rack_id: Option<String>,
    /// The client id of the request header (for describe).
    pub client_id: String,
    /// The client's host (for describe).
    pub client_host: String,
    /// 0 = join, −1 = leave, −2 = static member leaving temporarily, > 0 = the epoch the
    /// member is at.
    pub member_epoch: i32,
    /// The rebalance timeout; −1 = unchanged (required on a join).
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names; `None` = unchanged.
    pub subscribed_topic_names: Option<Vec<TopicName>>,
    /// Subscription regex; `None` = unchanged, `Some("")` = none.
    pub subscribed_topic_regex: Option<String>,
    /// Server assignor name; `None` = unchanged.
    pub server_assignor: Option<String>,
    /// Partitions the member owns now; `None` = unchanged since the last heartbeat.
    /// Must be `Some` and empty on a join.
    pub owned_partitions: Option<BTreeSet<TopicPartition>>,
}

/// The answer to a [`HeartbeatRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeartbeatResponse {
    /// An error code and message, or `None` for success.
    pub error: Option<(i16, String)>,
    /// The member id (generated for a v0 join); the request's on errors.
    pub member_id: String,
    /// The member's epoch now (−1 / −2 after leaving, 0 on errors).
    pub member_epoch: i32,
    /// How often the member should heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's assignment: present on a full request (a join, or a request with
    /// rebalance timeout, subscription and owned partitions) and when it changed;
    /// absent otherwise.
    pub assignment: Option<BTreeSet<TopicPartition>>,
}

/// What every operation needs from the outside.
pub(crate) struct Env<'a> {
    /// Now, in ms of a monotonic clock.
    pub now: u64,
    /// The topics and their partition counts.
    pub topics: &'a BTreeMap<TopicName, u32>,
    /// The loaded assignors.
    pub assignors: &'a dyn Assignors,
    /// The assignor of groups whose members name none (aliases apply).
    pub default_assignor: &'a str,
    /// The session timeout of every member.
    pub session_timeout_ms: u32,
    /// The heartbeat interval told to every member.
    pub heartbeat_interval_ms: u32,
    /// The maximum number of members of a group.
    pub max_group_size: usize,
}

/// The state of a group (Kafka's names, as in ConsumerGroupDescribe and ListGroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupState {
    /// No members.
    Empty,
    /// The assignor failed to compute the target of the group epoch; retrying.
    Assigning,
    /// Some member has not reached the target assignment.
    Reconciling,
    /// Every member is at the target assignment.
    Stable,
}

impl GroupState {
    /// Kafka's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// Where a member is in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberState {
    /// At its target assignment (or about to move to a new one on its next heartbeat).
    Stable,
    /// Waiting for the member to revoke partitions.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// A group, as ConsumerGroupDescribe and the admin API show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupDescription {
    /// The group.
    pub group: GroupId,
    /// Its state, by Kafka's name: Empty, Assigning, Reconciling, Stable.
    pub state: &'static str,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The assignor of the last target assignment (our plugin name).
    pub assignor: String,
    /// The members, by member id.
    pub members: Vec<MemberDescription>,
}

/// One member of a [`GroupDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// The instance id of a static member.
    pub instance_id: Option<String>,
    /// The rack.
    pub rack_id: Option<String>,
    /// The client id of its last heartbeat.
    pub client_id: String,
    /// The client host of its last heartbeat.
    pub client_host: String,
    /// The member epoch (−2 while a static member is away).
    pub member_epoch: i32,
    /// Its reconciliation state.
    pub state: &'static str,
    /// The subscribed topic names, sorted.
    pub subscribed_topic_names: Vec<TopicName>,
    /// The subscription regex.
    pub subscribed_topic_regex: Option<String>,
    /// The server assignor it asked for (resolved to our plugin name).
    pub server_assignor: Option<String>,
    /// The partitions it is assigned now.
    pub assignment: BTreeSet<TopicPartition>,
    /// Partitions it was asked to revoke and still holds.
    pub pending_revocation: BTreeSet<TopicPartition>,
    /// Its target assignment.
    pub target_assignment: BTreeSet<TopicPartition>,
}

/// One member of a group.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: u64,
    names: BTreeSet<TopicName>,
    /// The pattern as sent and its compiled, anchored form.
    regex: Option<(String, Regex)>,
    /// The server assignor it asked for, resolved to a loaded assignor.
    server_assignor: Option<String>,
    /// The topics it subscribes to: its names, and the existing topics its regex
    /// matches.
    topics: BTreeSet<TopicName>,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    assigned: BTreeSet<TopicPartition>,
    pending_revocation: BTreeSet<TopicPartition>,
    session_deadline: u64,
    /// While partitions await revocation: when the member is fenced for not revoking.
    rebalance_deadline: Option<u64>,
    /// This member's key in [`ConsumerGroups::deadlines`].
    timer: Option<u64>,
}

impl Member {
    fn new(id: String, now: u64) -> Self {
        Member {
            id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 0,
            names: BTreeSet::new(),
            regex: None,
            server_assignor: None,
            topics: BTreeSet::new(),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: BTreeSet::new(),
            pending_revocation: BTreeSet::new(),
            session_deadline: now,
            rebalance_deadline: None,
            timer: None,
        }
    }

    /// The topics this member subscribes to given the current topics; `cache` shares
    /// the matches of a pattern between the members that use it.
    fn resolve(
        &self,
        topics: &BTreeMap<TopicName, u32>,
        cache: &mut BTreeMap<String, BTreeSet<TopicName>>,
    ) -> BTreeSet<TopicName> {
        let mut out = self.names.clone();
        if let Some((pattern, regex)) = &self.regex {
            let matches = cache.entry(pattern.clone()).or_insert_with(|| {
                topics
                    .keys()
                    .filter(|t| !is_internal_topic(t.as_str()) && regex.is_match(t.as_str()))
                    .cloned()
                    .collect()
            });
            out.extend(matches.iter().cloned());
        }
        out
    }

    /// When this member must next be looked at.
    fn deadline(&self) -> u64 {
        self.rebalance_deadline
            .map_or(self.session_deadline, |r| r.min(self.session_deadline))
    }
}

/// A member's next reconciliation step.
struct Step {
    epoch: i32,
    state: MemberState,
    assigned: BTreeSet<TopicPartition>,
    pending_revocation: BTreeSet<TopicPartition>,
}

/// One KIP-848 group.
#[derive(Debug)]
struct Group {
    id: GroupId,
    epoch: i32,
    assignment_epoch: i32,
    /// The target assignment, by member id (members missing here get nothing).
    target: Target,
    members: BTreeMap<String, Member>,
    /// Instance id → member id of the static members.
    statics: BTreeMap<String, String>,
    /// Who holds each partition (assigned or pending revocation): at most one member.
    owners: BTreeMap<TopicPartition, String>,
    /// Partition counts of the existing subscribed topics, as of the last epoch bump.
    metadata: BTreeMap<TopicName, u32>,
    /// The assignor of the last target assignment.
    assignor: String,
    /// After an assignor failure: when to try again.
    retry_at: Option<u64>,
}

impl Group {
    fn new(id: GroupId, assignor: String) -> Self {
        Group {
            id,
            epoch: 0,
            assignment_epoch: 0,
            target: BTreeMap::new(),
            members: BTreeMap::new(),
            statics: BTreeMap::new(),
            owners: BTreeMap::new(),
            metadata: BTreeMap::new(),
            assignor,
            retry_at: None,
        }
    }

    fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.epoch > self.assignment_epoch || self.retry_at.is_some() {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// Partition counts of the existing topics the members subscribe to.
    fn compute_metadata(&self, topics: &BTreeMap<TopicName, u32>) -> BTreeMap<TopicName, u32> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for t in &m.topics {
                if let Some(&count) = topics.get(t) {
                    out.insert(t.clone(), count);
                }
            }
        }
        out
    }

    /// The assignor the group uses: the one most members name, else the default.
    fn preferred_assignor(&self, env: &Env<'_>) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *counts.entry(a.as_str()).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map(|(name, _)| name.to_owned())
            .unwrap_or_else(|| {
                resolve_assignor(env, env.default_assignor)
                    .unwrap_or_else(|| env.default_assignor.to_owned())
            })
    }

    /// Runs the group's assignor over the members: the assignor's name and the
    /// checked target, or the assignor's name and what went wrong.
    fn run_assignor(&self, env: &Env<'_>) -> AssignorRun {
        let requested = self.preferred_assignor(env);
        let assignor = if env.assignors.contains(&requested) {
            requested
        } else {
            let default = resolve_assignor(env, env.default_assignor)
                .unwrap_or_else(|| env.default_assignor.to_owned());
            tracing::warn!(
                group = %self.id,
                requested,
                default,
                "assignor `{requested}` is not loaded; the group uses the default assignor `{default}`"
            );
            default
        };
        if self.members.is_empty() {
            return Ok((assignor, BTreeMap::new()));
        }
        let ids: Vec<ConsumerId> = self.members.keys().map(ConsumerId::new).collect();
        let none = BTreeSet::new();
        let views: Vec<MemberView<'_>> = self
            .members
            .values()
            .zip(&ids)
            .map(|(m, id)| MemberView {
                id,
                topics: &m.topics,
                owned: self.target.get(&m.id).unwrap_or(&none),
            })
            .collect();
        let input = build_input(self.id.as_str(), &views, env.topics);
        let checked = env
            .assignors
            .assign(&assignor, &input)
            .map_err(|e| e.to_string())
            .and_then(|output| {
                validate_assignment(&views, env.topics, &output)
                    .map_err(|e| format!("invalid assignment: {e}"))
            });
        match checked {
            Ok(checked) => Ok((
                assignor,
                checked
                    .into_iter()
                    .map(|(id, set)| (id.as_str().to_owned(), set))
                    .collect(),
            )),
            Err(message) => Err((assignor, message)),
        }
    }

    /// Installs a new target at the group epoch, or after an assignor failure the old
    /// one (without removed members and vanished partitions) and a retry time.
    fn install(&mut self, env: &Env<'_>, result: AssignorRun) {
        self.assignment_epoch = self.epoch;
        match result {
            Ok((assignor, target)) => {
                self.target = target;
                self.assignor = assignor;
                self.retry_at = None;
                tracing::debug!(group = %self.id, epoch = self.epoch, assignor = %self.assignor, "new target assignment");
            }
            Err((assignor, message)) => {
                tracing::warn!(group = %self.id, epoch = self.epoch, %assignor, %message, "target assignment failed; the previous one stays until a retry succeeds");
                let members = &self.members;
                self.target.retain(|id, _| members.contains_key(id));
                for (id, set) in &mut self.target {
                    let topics = &members[id].topics;
                    set.retain(|tp| {
                        topics.contains(&tp.topic)
                            && env.topics.get(&tp.topic).is_some_and(|&count| {
                                tp.partition >= 0 && i64::from(tp.partition) < i64::from(count)
                            })
                    });
                }
                self.retry_at = Some(
                    env.now
                        .saturating_add(u64::from(env.heartbeat_interval_ms.max(1))),
                );
            }
        }
    }

    /// Computes the target assignment of the group epoch.
    fn compute_target(&mut self, env: &Env<'_>) {
        let result = self.run_assignor(env);
        self.install(env, result);
    }

    /// After an assignor failure, once the retry time has come: runs it again, and
    /// bumps the group epoch for its target if it succeeds.
    fn maybe_retry(&mut self, env: &Env<'_>) {
        if self.retry_at.is_none_or(|at| at > env.now) {
            return;
        }
        let result = self.run_assignor(env);
        if result.is_ok() {
            self.epoch = self.epoch.saturating_add(1);
            self.install(env, result);
        } else {
            self.retry_at = Some(
                env.now
                    .saturating_add(u64::from(env.heartbeat_interval_ms.max(1))),
            );
        }
    }

    /// The next step of member `m` towards its target (Kafka's
    /// `CurrentAssignmentBuilder.computeNextAssignment`): revoke first, keeping
    /// `revoking_epoch`; else take what is released and move to the assignment epoch.
    fn next_step(&self, m: &Member, revoking_epoch: i32) -> Step {
        let none = BTreeSet::new();
        let target = self.target.get(&m.id).unwrap_or(&none);
        let kept: BTreeSet<TopicPartition> = m.assigned.intersection(target).cloned().collect();
        let revoke: BTreeSet<TopicPartition> = m.assigned.difference(&kept).cloned().collect();
        let mut unreleased = false;
        let mut take = BTreeSet::new();
        for tp in target.difference(&kept) {
            if self.owners.get(tp).is_none_or(|o| *o == m.id) {
                take.insert(tp.clone());
            } else {
                unreleased = true;
            }
        }
        if !revoke.is_empty() {
            Step {
                epoch: revoking_epoch,
                state: MemberState::UnrevokedPartitions,
                assigned: kept,
                pending_revocation: revoke,
            }
        } else {
            let mut assigned = kept;
            assigned.extend(take);
            Step {
                epoch: self.assignment_epoch,
                state: if unreleased {
                    MemberState::UnreleasedPartitions
                } else {
                    MemberState::Stable
                },
                assigned,
                pending_revocation: BTreeSet::new(),
            }
        }
    }

    /// Moves member `id` towards its target given the partitions it reports owning
    /// (Kafka's `CurrentAssignmentBuilder.build`).
    fn reconcile(&mut self, id: &str, owned: Option<&BTreeSet<TopicPartition>>, now: u64) {
        let Some(m) = self.members.get(id) else {
            return;
        };
        let step = match m.state {
            MemberState::Stable => {
                (m.epoch != self.assignment_epoch).then(|| self.next_step(m, m.epoch))
            }
            MemberState::UnrevokedPartitions => {
                let still_owns =
                    owned.is_none_or(|o| m.pending_revocation.iter().any(|tp| o.contains(tp)));
                (!still_owns).then(|| self.next_step(m, m.epoch))
            }
            MemberState::UnreleasedPartitions => Some(self.next_step(m, m.epoch)),
        };
        if let Some(step) = step {
            self.apply(id, step, now);
        }
    }

    /// Applies a reconciliation step to member `id`, keeping [`Group::owners`] exact.
    fn apply(&mut self, id: &str, step: Step, now: u64) {
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        if m.epoch == step.epoch
            && m.state == step.state
            && m.assigned == step.assigned
            && m.pending_revocation == step.pending_revocation
        {
            return;
        }
        for tp in m.assigned.iter().chain(&m.pending_revocation) {
            if self.owners.get(tp).is_some_and(|o| o == id) {
                self.owners.remove(tp);
            }
        }
        for tp in step.assigned.iter().chain(&step.pending_revocation) {
            let previous = self.owners.insert(tp.clone(), id.to_owned());
            debug_assert!(
                previous.is_none(),
                "{tp} given to {id} while held by {previous:?}"
            );
        }
        if step.epoch != m.epoch {
            m.previous_epoch = m.epoch;
            m.epoch = step.epoch;
        }
        m.state = step.state;
        m.assigned = step.assigned;
        m.pending_revocation = step.pending_revocation;
        m.rebalance_deadline = (m.state == MemberState::UnrevokedPartitions)
            .then(|| now.saturating_add(m.rebalance_timeout_ms));
    }

    /// Removes a member, releasing its partitions, and bumps the group epoch.
    fn remove(&mut self, id: &str, topics: &BTreeMap<TopicName, u32>) -> Option<Member> {
        let m = self.members.remove(id)?;
        for tp in m.assigned.iter().chain(&m.pending_revocation) {
            if self.owners.get(tp).is_some_and(|o| *o == m.id) {
                self.owners.remove(tp);
            }
        }
        self.target.remove(id);
        if let Some(instance) = &m.instance_id {
            if self.statics.get(instance).is_some_and(|o| *o == m.id) {
                self.statics.remove(instance);
            }
        }
        self.metadata = self.compute_metadata(topics);
        self.epoch = self.epoch.saturating_add(1);
        Some(m)
    }

    /// Checks a heartbeat's epoch against the member's (Kafka's
    /// `throwIfConsumerGroupMemberEpochIsInvalid`).
    fn check_epoch(
        m: &Member,
        received: i32,
        owned: Option<&BTreeSet<TopicPartition>>,
    ) -> Result<(), Failure> {
        if received == JOIN_EPOCH {
            return Ok(());
        }
        if received > m.epoch {
            return Err(failure(
                codes::FENCED_MEMBER_EPOCH,
                format!(
                    "the member epoch {received} is newer than the coordinator's ({}); the member must abandon its partitions and rejoin",
                    m.epoch
                ),
            ));
        }
        if received < m.epoch {
            let lost_response =
                received == m.previous_epoch && owned.is_some_and(|o| o.is_subset(&m.assigned));
            if !lost_response {
                return Err(failure(
                    codes::FENCED_MEMBER_EPOCH,
                    format!(
                        "the member epoch {received} is older than the coordinator's ({}); the member must abandon its partitions and rejoin",
                        m.epoch
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// How a heartbeat found its member.
enum Found {
    /// An existing member with this id.
    Existing(String),
    /// A new member with this id.
    New(String),
    /// A static member joining with a new member id takes over from the one that left
    /// with epoch −2.
    Replace { old: String, new: String },
}

/// Resolves a server assignor name: a loaded assignor of that name, else the Kafka
/// client names `uniform` → `sticky` and `range` → `range` when those are loaded.
fn resolve_assignor(env: &Env<'_>, name: &str) -> Option<String> {
    if env.assignors.contains(name) {
        return Some(name.to_owned());
    }
    let alias = match name {
        "uniform" => "sticky",
        "range" => "range",
        _ => return None,
    };
    env.assignors.contains(alias).then(|| alias.to_owned())
}

/// Whether `s` is empty or only whitespace.
fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn validate(req: &HeartbeatRequest) -> Result<(), Failure> {
    let invalid = |m: &str| Err(failure(codes::INVALID_REQUEST, m));
    if (req.version >= CLIENT_MEMBER_ID_VERSION
        || req.member_epoch > 0
        || req.member_epoch == LEAVE_EPOCH)
        && blank(&req.member_id)
    {
        return invalid("MemberId can't be empty.");
    }
    if blank(req.group.as_str()) {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref().is_some_and(blank) {
        return invalid("RackId can't be empty.");
    }
    if req.rebalance_timeout_ms < -1 {
        return invalid("RebalanceTimeoutMs is invalid.");
    }
    match req.member_epoch {
        JOIN_EPOCH => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned_partitions.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        STATIC_LEAVE_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < STATIC_LEAVE_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    Ok(())
}

/// The KIP-848 groups of a coordinator.
#[derive(Debug, Default)]
pub(crate) struct ConsumerGroups {
    groups: BTreeMap<GroupId, Group>,
    /// (deadline, group, member id) of every member: its session deadline, or its
    /// rebalance deadline when earlier.
    deadlines: BTreeSet<(u64, GroupId, String)>,
    /// Member ids generated so far (v0 joins).
    generated: u64,
}

/// Updates `m`'s entry in the deadline index.
fn reschedule(deadlines: &mut BTreeSet<(u64, GroupId, String)>, group: &GroupId, m: &mut Member) {
    let new = m.deadline();
    if m.timer == Some(new) {
        return;
    }
    if let Some(old) = m.timer.take() {
        deadlines.remove(&(old, group.clone(), m.id.clone()));
    }
    deadlines.insert((new, group.clone(), m.id.clone()));
    m.timer = Some(new);
}

/// Removes `m`'s entry from the deadline index.
fn unschedule(deadlines: &mut BTreeSet<(u64, GroupId, String)>, group: &GroupId, m: &Member) {
    if let Some(old) = m.timer {
        deadlines.remove(&(old, group.clone(), m.id.clone()));
    }
}

impl ConsumerGroups {
    /// Whether `group` is a KIP-848 group here.
    pub(crate) fn contains(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// Handles a ConsumerGroupHeartbeat: join, heartbeat, leave.
    pub(crate) fn heartbeat(&mut self, env: &Env<'_>, req: HeartbeatRequest) -> HeartbeatResponse {
        let existed = self.groups.contains_key(&req.group);
        let interval = i32::try_from(env.heartbeat_interval_ms).unwrap_or(i32::MAX);
        match self.try_heartbeat(env, &req) {
            Ok(mut response) => {
                response.heartbeat_interval_ms = interval;
                response
            }
            Err((code, message)) => {
                if !existed
                    && self
                        .groups
                        .get(&req.group)
                        .is_some_and(|g| g.members.is_empty())
                {
                    self.groups.remove(&req.group);
                }
                tracing::debug!(group = %req.group, member = %req.member_id, code, %message, "heartbeat refused");
                HeartbeatResponse {
                    error: Some((code, message)),
                    member_id: req.member_id,
                    member_epoch: 0,
                    heartbeat_interval_ms: interval,
                    assignment: None,
                }
            }
        }
    }

    fn try_heartbeat(
        &mut self,
        env: &Env<'_>,
        req: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, Failure> {
        validate(req)?;
        let regex = match req.subscribed_topic_regex.as_deref() {
            None => None,
            Some("") => Some(None),
            Some(pattern) => match compile_pattern(pattern) {
                Ok(r) => Some(Some((pattern.to_owned(), r))),
                Err(e) => {
                    // The pattern and the parser's report both quote the input: bound the
                    // answer (a client may send a pattern of any length).
                    let mut message = format!(
                        "SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}"
                    );
                    if message.len() > MAX_ERROR_MESSAGE_BYTES {
                        let mut cut = MAX_ERROR_MESSAGE_BYTES;
                        while !message.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        message.truncate(cut);
                        message.push('…');
                    }
                    return Err(failure(codes::INVALID_REGULAR_EXPRESSION, message));
                }
            },
        };
        // A name that is not loaded is kept, not refused (Kafka answers
        // UNSUPPORTED_ASSIGNOR, a fatal error in librdkafka): the group runs the default
        // assignor until a rescan loads it (`run_assignor`).
        let assignor = req
            .server_assignor
            .as_ref()
            .map(|name| resolve_assignor(env, name).unwrap_or_else(|| name.clone()));
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(env, req);
        }

        // The group.
        if !self.groups.contains_key(&req.group) {
            if req.member_epoch != JOIN_EPOCH {
                return Err(failure(
                    codes::GROUP_ID_NOT_FOUND,
                    format!("Consumer group {} not found.", req.group),
                ));
            }
            let default = resolve_assignor(env, env.default_assignor)
                .unwrap_or_else(|| env.default_assignor.to_owned());
            self.groups
                .insert(req.group.clone(), Group::new(req.group.clone(), default));
        }
        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            // A v0 join (validated above): the coordinator names the member.
            let g = &self.groups[&req.group];
            loop {
                self.generated += 1;
                let candidate = format!("drover-member-{}", self.generated);
                if !g.members.contains_key(&candidate) {
                    member_id = candidate;
                    break;
                }
            }
        }
        let Self {
            groups, deadlines, ..
        } = self;
        let g = groups.get_mut(&req.group).expect("inserted above");
        let owned = req.owned_partitions.as_ref();

        // The member.
        let found = match &req.instance_id {
            None => match g.members.get(&member_id) {
                Some(m) => {
                    Group::check_epoch(m, req.member_epoch, owned)?;
                    Found::Existing(member_id)
                }
                None if req.member_epoch == JOIN_EPOCH => Found::New(member_id),
                None => {
                    return Err(failure(
                        codes::UNKNOWN_MEMBER_ID,
                        format!("Member {member_id} is not a member of group {}.", g.id),
                    ))
                }
            },
            Some(instance) => match g.statics.get(instance).and_then(|id| g.members.get(id)) {
                None if req.member_epoch == JOIN_EPOCH => {
                    if g.members.contains_key(&member_id) {
                        Found::Existing(member_id)
                    } else {
                        Found::New(member_id)
                    }
                }
                None => {
                    return Err(failure(
                        codes::UNKNOWN_MEMBER_ID,
                        format!("Instance id {instance} is unknown."),
                    ))
                }
                Some(old) if req.member_epoch == JOIN_EPOCH => {
                    if old.epoch == STATIC_LEAVE_EPOCH {
                        if old.id != member_id && g.members.contains_key(&member_id) {
                            return Err(failure(
                                codes::INVALID_REQUEST,
                                format!("Member id {member_id} is used by another member."),
                            ));
                        }
                        Found::Replace {
                            old: old.id.clone(),
                            new: member_id,
                        }
                    } else if old.id == member_id {
                        Found::Existing(member_id)
                    } else {
                        return Err(failure(
                            codes::UNRELEASED_INSTANCE_ID,
                            format!(
                                "Static member {member_id} with instance id {instance} cannot join the group because the instance id is owned by member {}.",
                                old.id
                            ),
                        ));
                    }
                }
                Some(old) => {
                    if old.id != member_id {
                        return Err(failure(
                            codes::FENCED_INSTANCE_ID,
                            format!(
                                "Static member {member_id} with instance id {instance} was fenced by member {}.",
                                old.id
                            ),
                        ));
                    }
                    Group::check_epoch(old, req.member_epoch, owned)?;
                    Found::Existing(member_id)
                }
            },
        };
        if let Found::New(_) = &found {
            if g.members.len() >= env.max_group_size {
                return Err(failure(
                    codes::GROUP_MAX_SIZE_REACHED,
                    format!(
                        "The consumer group has reached its maximum capacity of {} members.",
                        env.max_group_size
                    ),
                ));
            }
        }

        // Create, replace or update the member; bump the group epoch if what the
        // assignment depends on changed.
        let mut bump = g.epoch == 0;
        let id = match found {
            Found::Existing(id) => id,
            Found::New(id) => {
                tracing::info!(group = %g.id, member = %id, instance = ?req.instance_id, "member joins");
                g.members
                    .insert(id.clone(), Member::new(id.clone(), env.now));
                bump = true;
                id
            }
            Found::Replace { old, new } => {
                let mut m = g.members.remove(&old).expect("found above");
                unschedule(deadlines, &g.id, &m);
                m.timer = None;
                tracing::info!(group = %g.id, old = %old, new = %new, instance = ?req.instance_id, "static member rejoins and replaces its previous incarnation");
                for tp in m.assigned.iter().chain(&m.pending_revocation) {
                    g.owners.insert(tp.clone(), new.clone());
                }
                if let Some(target) = g.target.remove(&old) {
                    g.target.insert(new.clone(), target);
                }
                if let Some(instance) = &m.instance_id {
                    g.statics.insert(instance.clone(), new.clone());
                }
                // The new incarnation resumes at the epoch the old one left at (never
                // 0: told epoch 0 while revoking, a client would "rejoin" owning
                // nothing and have the partitions it still consumes released).
                m.id = new.clone();
                m.epoch = m.previous_epoch.max(1);
                m.previous_epoch = m.epoch;
                g.members.insert(new.clone(), m);
                new
            }
        };
        let m = g.members.get_mut(&id).expect("present");
        if let Some(instance) = &req.instance_id {
            if m.instance_id.as_ref() != Some(instance) {
                if let Some(previous) = m.instance_id.take() {
                    g.statics.remove(&previous);
                }
                m.instance_id = Some(instance.clone());
                g.statics.insert(instance.clone(), id.clone());
            }
        }
        if req.rack_id.is_some() {
            m.rack_id = req.rack_id.clone();
        }
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        if req.rebalance_timeout_ms >= 0 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms as u64;
        }
        if let Some(a) = assignor {
            if m.server_assignor.as_ref() != Some(&a) {
                m.server_assignor = Some(a);
                bump = true;
            }
        }
        let mut subscription_changed = false;
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<TopicName> = names.iter().cloned().collect();
            if names != m.names {
                m.names = names;
                subscription_changed = true;
            }
        }
        if let Some(regex) = regex {
            if regex.as_ref().map(|r| &r.0) != m.regex.as_ref().map(|r| &r.0) {
                m.regex = regex;
                subscription_changed = true;
            }
        }
        if subscription_changed {
            m.topics = m.resolve(env.topics, &mut BTreeMap::new());
        }
        if bump || subscription_changed {
            let metadata = g.compute_metadata(env.topics);
            if metadata != g.metadata {
                g.metadata = metadata;
                bump = true;
            }
            bump |= subscription_changed;
        }
        if bump {
            g.epoch = g.epoch.saturating_add(1);
            tracing::debug!(group = %g.id, epoch = g.epoch, "group epoch bumped");
        }
        if g.epoch > g.assignment_epoch {
            g.compute_target(env);
        } else {
            g.maybe_retry(env);
        }

        // Reconcile and answer.
        let before = g.members[&id].assigned.clone();
        g.reconcile(&id, owned, env.now);
        let m = g.members.get_mut(&id).expect("present");
        m.session_deadline = env.now.saturating_add(u64::from(env.session_timeout_ms));
        reschedule(deadlines, &g.id, m);
        let full = req.member_epoch == JOIN_EPOCH
            || (req.rebalance_timeout_ms != -1
                && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
                && owned.is_some());
        Ok(HeartbeatResponse {
            error: None,
            member_id: id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: 0,
            assignment: (full || m.assigned != before).then(|| m.assigned.clone()),
        })
    }

    /// Epoch −1 (leave) and −2 (static member leaving temporarily).
    fn leave(
        &mut self,
        env: &Env<'_>,
        req: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, Failure> {
        let Self {
            groups, deadlines, ..
        } = self;
        let Some(g) = groups.get_mut(&req.group) else {
            return Err(failure(
                codes::GROUP_ID_NOT_FOUND,
                format!("Consumer group {} not found.", req.group),
            ));
        };
        let id = match &req.instance_id {
            None => {
                if !g.members.contains_key(&req.member_id) {
                    return Err(failure(
                        codes::UNKNOWN_MEMBER_ID,
                        format!(
                            "Member {} is not a member of group {}.",
                            req.member_id, g.id
                        ),
                    ));
                }
                req.member_id.clone()
            }
            Some(instance) => {
                let Some(current) = g.statics.get(instance) else {
                    return Err(failure(
                        codes::UNKNOWN_MEMBER_ID,
                        format!("Instance id {instance} is unknown."),
                    ));
                };
                if *current != req.member_id {
                    return Err(failure(
                        codes::FENCED_INSTANCE_ID,
                        format!(
                            "Static member {} with instance id {instance} was fenced by member {current}.",
                            req.member_id
                        ),
                    ));
                }
                current.clone()
            }
        };
        if req.member_epoch == STATIC_LEAVE_EPOCH {
            // The member keeps its place and assignment (no epoch bump) until its
            // session expires; what it was revoking is released (it stopped).
            let m = g.members.get_mut(&id).expect("checked");
            tracing::info!(group = %g.id, member = %id, instance = ?m.instance_id, "static member leaves temporarily");
            for tp in std::mem::take(&mut m.pending_revocation) {
                if g.owners.get(&tp).is_some_and(|o| *o == id) {
                    g.owners.remove(&tp);
                }
            }
            if m.epoch != STATIC_LEAVE_EPOCH {
                m.previous_epoch = m.epoch;
                m.epoch = STATIC_LEAVE_EPOCH;
            }
            m.rebalance_deadline = None;
            m.session_deadline = env.now.saturating_add(u64::from(env.session_timeout_ms));
            reschedule(deadlines, &g.id, m);
        } else {
            tracing::info!(group = %g.id, member = %id, "member leaves");
            if let Some(m) = g.remove(&id, env.topics) {
                unschedule(deadlines, &g.id, &m);
            }
            g.compute_target(env);
        }
        Ok(HeartbeatResponse {
            error: None,
            member_id: id,
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// The topics or their partition counts changed (creation, deletion, new
    /// partitions): re-resolves regex subscriptions and, in every group whose
    /// subscriptions or subscribed topics changed, bumps the group epoch and computes
    /// a new target. A failed target computation is retried when due.
    pub(crate) fn topics_changed(&mut self, env: &Env<'_>) {
        let mut cache = BTreeMap::new();
        for g in self.groups.values_mut() {
            let mut changed = false;
            for m in g.members.values_mut() {
                let topics = m.resolve(env.topics, &mut cache);
                if topics != m.topics {
                    m.topics = topics;
                    changed = true;
                }
            }
            let metadata = g.compute_metadata(env.topics);
            if metadata != g.metadata {
                g.metadata = metadata;
                changed = true;
            }
            if changed {
                g.epoch = g.epoch.saturating_add(1);
                tracing::debug!(group = %g.id, epoch = g.epoch, "topic metadata changed");
                g.compute_target(env);
            } else {
                g.maybe_retry(env);
            }
        }
    }

    /// The earliest session or rebalance deadline of any member.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(at, _, _)| *at)
    }

    /// Removes every member past its session deadline (no heartbeat, or a static
    /// member that did not come back) or its rebalance deadline (partitions not
    /// revoked in time), and recomputes the targets of their groups. Returns the
    /// removed members and why.
    pub(crate) fn expire(&mut self, env: &Env<'_>) -> Vec<(GroupId, String, &'static str)> {
        let mut out = Vec::new();
        let mut touched: BTreeSet<GroupId> = BTreeSet::new();
        while let Some((at, group, id)) = self.deadlines.first().cloned() {
            if at > env.now {
                break;
            }
            self.deadlines.pop_first();
            let Some(g) = self.groups.get_mut(&group) else {
                continue;
            };
            let Some(m) = g.members.get(&id) else {
                continue;
            };
            let reason = if m.rebalance_deadline.is_some_and(|r| r <= env.now) {
                "rebalance timeout: partitions not revoked in time"
            } else if m.epoch == STATIC_LEAVE_EPOCH {
                "static member did not rejoin within the session timeout"
            } else {
                "session timeout"
            };
            tracing::info!(group = %group, member = %id, reason, "member fenced");
            g.remove(&id, env.topics);
            touched.insert(group.clone());
            out.push((group, id, reason));
        }
        for group in touched {
            if let Some(g) = self.groups.get_mut(&group) {
                if g.epoch > g.assignment_epoch {
                    g.compute_target(env);
                }
            }
        }
        out
    }

    /// OffsetCommit v9+ checks for a group that is a KIP-848 group: a member with its
    /// current epoch may commit; a negative epoch (standalone commit, admin client) only
    /// while the group has no members. An unknown group accepts a negative epoch (the
    /// glue creates a simple group) and is GROUP_ID_NOT_FOUND otherwise.
    pub(crate) fn check_commit(
        &self,
        group: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), i16> {
        let Some(g) = self.groups.get(group) else {
            return if member_epoch < 0 {
                Ok(())
            } else {
                Err(codes::GROUP_ID_NOT_FOUND)
            };
        };
        if member_epoch < 0 && g.members.is_empty() {
            return Ok(());
        }
        let m = g.members.get(member_id).ok_or(codes::UNKNOWN_MEMBER_ID)?;
        if m.epoch != member_epoch {
            return Err(codes::STALE_MEMBER_EPOCH);
        }
        Ok(())
    }

    /// OffsetFetch v9+ checks: without a member id and with a negative epoch (admin
    /// client, standalone consumer) always allowed; else the member must exist with
    /// this epoch. An unknown group is allowed (it has no offsets).
    pub(crate) fn check_fetch(
        &self,
        group: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), i16> {
        let Some(g) = self.groups.get(group) else {
            return Ok(());
        };
        let Some(member_id) = member_id else {
            return if member_epoch < 0 {
                Ok(())
            } else {
                Err(codes::UNKNOWN_MEMBER_ID)
            };
        };
        let m = g.members.get(member_id).ok_or(codes::UNKNOWN_MEMBER_ID)?;
        if m.epoch != member_epoch {
            return Err(codes::STALE_MEMBER_EPOCH);
        }
        Ok(())
    }

    /// A group as ConsumerGroupDescribe shows it; `None` for an unknown group (Dead).
    pub(crate) fn describe(&self, group: &str) -> Option<GroupDescription> {
        let g = self.groups.get(group)?;
        let none = BTreeSet::new();
        Some(GroupDescription {
            group: g.id.clone(),
            state: g.state().as_str(),
            group_epoch: g.epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g.assignor.clone(),
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    member_epoch: m.epoch,
                    state: m.state.as_str(),
                    subscribed_topic_names: m.names.iter().cloned().collect(),
                    subscribed_topic_regex: m.regex.as_ref().map(|r| r.0.clone()),
                    server_assignor: m.server_assignor.clone(),
                    assignment: m.assigned.clone(),
                    pending_revocation: m.pending_revocation.clone(),
                    target_assignment: g.target.get(&m.id).unwrap_or(&none).clone(),
                })
                .collect(),
        })
    }

    /// Every group and its state (for ListGroups), by group id.
    pub(crate) fn list(&self) -> Vec<(GroupId, &'static str)> {
        self.groups
            .values()
            .map(|g| (g.id.clone(), g.state().as_str()))
            .collect()
    }

    /// DeleteGroups: only a group without members (NON_EMPTY_GROUP otherwise);
    /// GROUP_ID_NOT_FOUND for an unknown group. The glue deletes its offsets.
    pub(crate) fn delete(&mut self, group: &str) -> Result<(), i16> {
        let g = self.groups.get(group).ok_or(codes::GROUP_ID_NOT_FOUND)?;
        if !g.members.is_empty() {
            return Err(codes::NON_EMPTY_GROUP);
        }
        self.groups.remove(group);
        Ok(())
    }

    /// Drops `group` with its members (its coordinator slot moved to another broker):
    /// their deadlines go; the members find the new coordinator on their next
    /// heartbeat. Returns whether the group existed.
    pub(crate) fn remove(&mut self, group: &str) -> bool {
        let Some(g) = self.groups.remove(group) else {
            return false;
        };
        for m in g.members.values() {
            unschedule(&mut self.deadlines, &g.id, m);
        }
        true
    }

    /// The ids of every group.
    pub(crate) fn ids(&self) -> Vec<GroupId> {
        self.groups.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_abi::assignor::{AssignInput, Assignment, AssignorMember, MemberAssignment};
    use drover_abi::{PluginError, TopicPartitions};
    use proptest::prelude::*;

    const SESSION: u32 = 10_000;
    const REBALANCE: i32 = 5_000;
    const G: &str = "g";

    /// In-process assignors (the plugins cannot be linked into this crate's tests:
    /// each exports the same abi_stable root-module symbol as the coordinator): a
    /// sticky and a range policy, and `broken`, which fails.
    struct TestAssignors;

    impl Assignors for TestAssignors {
        fn contains(&self, name: &str) -> bool {
            matches!(name, "sticky" | "range" | "broken")
        }

        fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
            match name {
                "sticky" => Ok(sticky(input)),
                "range" => Ok(range(input)),
                "broken" => Err(PluginError::internal("broken on purpose")),
                other => Err(PluginError::invalid_input(format!("no assignor {other}"))),
            }
        }
    }

    /// A sticky, balanced policy: members keep what they own up to the quota
    /// (partitions / members, rounded up); the rest go, in (topic, partition) order, to
    /// the least-loaded subscribed member (ties: smallest id).
    fn sticky(input: &AssignInput) -> Assignment {
        let mut members: Vec<&AssignorMember> = input.members.iter().collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let subscribed =
            |i: usize, topic: &str| members[i].topics.iter().any(|t| t.as_str() == topic);
        let mut owner: BTreeMap<(&str, i32), usize> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            for tps in m.owned.iter() {
                for &p in tps.partitions.iter() {
                    owner.entry((tps.topic.as_str(), p)).or_insert(i);
                }
            }
        }
        let total: usize = input.topics.iter().map(|t| t.partitions as usize).sum();
        let quota = total.div_ceil(members.len().max(1));
        let mut result: Vec<Vec<(&str, i32)>> = vec![Vec::new(); members.len()];
        let mut rest = Vec::new();
        for t in input.topics.iter() {
            for p in 0..t.partitions as i32 {
                let tp = (t.name.as_str(), p);
                match owner.get(&tp) {
                    Some(&i) if subscribed(i, tp.0) && result[i].len() < quota => {
                        result[i].push(tp)
                    }
                    _ => rest.push(tp),
                }
            }
        }
        for tp in rest {
            if let Some(i) = (0..members.len())
                .filter(|&i| subscribed(i, tp.0))
                .min_by_key(|&i| result[i].len())
            {
                result[i].push(tp);
            }
        }
        let out: Vec<MemberAssignment> = members
            .iter()
            .zip(result)
            .map(|(m, mut tps)| {
                tps.sort();
                let mut grouped: Vec<TopicPartitions> = Vec::new();
                for (t, p) in tps {
                    match grouped.last_mut() {
                        Some(last) if last.topic.as_str() == t => last.partitions.push(p),
                        _ => grouped.push(TopicPartitions::new(t, vec![p])),
                    }
                }
                MemberAssignment {
                    member_id: m.member_id.clone(),
                    partitions: grouped.into(),
                }
            })
            .collect();
        Assignment {
            members: out.into(),
        }
    }

    /// Kafka's range policy: per topic, contiguous ranges over the sorted subscribers.
    fn range(input: &AssignInput) -> Assignment {
        let mut members: Vec<&AssignorMember> = input.members.iter().collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let mut out: Vec<MemberAssignment> = members
            .iter()
            .map(|m| MemberAssignment {
                member_id: m.member_id.clone(),
                partitions: Default::default(),
            })
            .collect();
        for t in input.topics.iter() {
            let subscribers: Vec<usize> = (0..members.len())
                .filter(|&i| {
                    members[i]
                        .topics
                        .iter()
                        .any(|x| x.as_str() == t.name.as_str())
                })
                .collect();
            let (n, k) = (t.partitions as usize, subscribers.len());
            for (j, &i) in subscribers.iter().enumerate() {
                let mine: Vec<i32> = (j * n / k..(j + 1) * n / k).map(|p| p as i32).collect();
                if !mine.is_empty() {
                    out[i]
                        .partitions
                        .push(TopicPartitions::new(t.name.as_str(), mine));
                }
            }
        }
        Assignment {
            members: out.into(),
        }
    }

    static ASSIGNORS: TestAssignors = TestAssignors;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter().map(|(t, p)| tp(t, *p)).collect()
    }

    fn join(id: &str, topics: &[&str]) -> HeartbeatRequest {
        HeartbeatRequest {
            version: 1,
            group: GroupId::new(G),
            member_id: id.to_owned(),
            instance_id: None,
            rack_id: None,
            client_id: "client".to_owned(),
            client_host: "/127.0.0.1".to_owned(),
            member_epoch: JOIN_EPOCH,
            rebalance_timeout_ms: REBALANCE,
            subscribed_topic_names: Some(topics.iter().map(TopicName::new).collect()),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned_partitions: Some(BTreeSet::new()),
        }
    }

    fn static_join(id: &str, instance: &str, topics: &[&str]) -> HeartbeatRequest {
        HeartbeatRequest {
            instance_id: Some(instance.to_owned()),
            ..join(id, topics)
        }
    }

    fn beat(id: &str, epoch: i32, owned: Option<BTreeSet<TopicPartition>>) -> HeartbeatRequest {
        HeartbeatRequest {
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            owned_partitions: owned,
            ..join(id, &[])
        }
    }

    /// A simulated KIP-848 client.
    #[derive(Debug, Clone)]
    struct Client {
        name: String,
        incarnation: u32,
        id: String,
        instance: Option<String>,
        names: Vec<TopicName>,
        regex: Option<String>,
        epoch: i32,
        /// What it consumes now.
        owned: BTreeSet<TopicPartition>,
        /// The last assignment the coordinator gave it.
        told: BTreeSet<TopicPartition>,
        up: bool,
    }

    /// A coordinator, its topics, virtual time and simulated clients of group `g`.
    struct World {
        groups: ConsumerGroups,
        topics: BTreeMap<TopicName, u32>,
        now: u64,
        max_group_size: usize,
        default_assignor: &'static str,
        clients: Vec<Client>,
    }

    impl World {
        fn new(topics: &[(&str, u32)]) -> Self {
            World {
                groups: ConsumerGroups::default(),
                topics: topics
                    .iter()
                    .map(|(t, n)| (TopicName::new(t), *n))
                    .collect(),
                now: 1_000,
                max_group_size: 100,
                default_assignor: "uniform",
                clients: Vec::new(),
            }
        }

        fn hb(&mut self, req: HeartbeatRequest) -> HeartbeatResponse {
            let env = Env {
                now: self.now,
                topics: &self.topics,
                assignors: &ASSIGNORS,
                default_assignor: self.default_assignor,
                session_timeout_ms: SESSION,
                heartbeat_interval_ms: 1_000,
                max_group_size: self.max_group_size,
            };
            let response = self.groups.heartbeat(&env, req);
            assert_eq!(response.heartbeat_interval_ms, 1_000);
            response
        }

        fn ok(&mut self, req: HeartbeatRequest) -> HeartbeatResponse {
            let response = self.hb(req);
            assert_eq!(response.error, None);
            response
        }

        fn code(&mut self, req: HeartbeatRequest) -> i16 {
            self.hb(req).error.expect("an error").0
        }

        fn set_topic(&mut self, topic: &str, partitions: u32) {
            self.topics.insert(TopicName::new(topic), partitions);
            let env = Env {
                now: self.now,
                topics: &self.topics,
                assignors: &ASSIGNORS,
                default_assignor: self.default_assignor,
                session_timeout_ms: SESSION,
                heartbeat_interval_ms: 1_000,
                max_group_size: self.max_group_size,
            };
            self.groups.topics_changed(&env);
        }

        /// Advances time and expires; a fenced client stops consuming (its own timers
        /// would have stopped it) and rejoins.
        fn tick(&mut self, ms: u64) -> Vec<(GroupId, String, &'static str)> {
            self.now += ms;
            let env = Env {
                now: self.now,
                topics: &self.topics,
                assignors: &ASSIGNORS,
                default_assignor: self.default_assignor,
                session_timeout_ms: SESSION,
                heartbeat_interval_ms: 1_000,
                max_group_size: self.max_group_size,
            };
            let expired = self.groups.expire(&env);
            for (_, id, _) in &expired {
                for c in self.clients.iter_mut().filter(|c| c.up && c.id == *id) {
                    c.owned.clear();
                    c.told.clear();
                    c.epoch = 0;
                }
            }
            expired
        }

        fn group(&self) -> &Group {
            &self.groups.groups[G]
        }

        fn member(&self, id: &str) -> &Member {
            &self.group().members[id]
        }

        fn add_client(
            &mut self,
            name: &str,
            instance: bool,
            names: &[&str],
            regex: Option<&str>,
        ) -> usize {
            self.clients.push(Client {
                name: name.to_owned(),
                incarnation: 0,
                id: format!("{name}-0"),
                instance: instance.then(|| format!("{name}-instance")),
                names: names.iter().map(TopicName::new).collect(),
                regex: regex.map(str::to_owned),
                epoch: 0,
                owned: BTreeSet::new(),
                told: BTreeSet::new(),
                up: true,
            });
            self.clients.len() - 1
        }

        /// One heartbeat of client `i`; with `ack` it first completes the revocations it
        /// was asked for.
        fn step(&mut self, i: usize, ack: bool) {
            let c = self.clients[i].clone();
            if !c.up {
                return;
            }
            let req = if c.epoch == 0 {
                HeartbeatRequest {
                    instance_id: c.instance.clone(),
                    subscribed_topic_names: Some(c.names.clone()),
                    subscribed_topic_regex: c.regex.clone(),
                    ..join(&c.id, &[])
                }
            } else {
                let owned = if ack {
                    c.owned.intersection(&c.told).cloned().collect()
                } else {
                    c.owned.clone()
                };
                self.clients[i].owned = owned.clone();
                HeartbeatRequest {
                    instance_id: c.instance.clone(),
                    ..beat(&c.id, c.epoch, Some(owned))
                }
            };
            let response = self.hb(req);
            let c = &mut self.clients[i];
            match response.error {
                None => {
                    assert!(
                        response.member_epoch > 0,
                        "{} told epoch {}",
                        c.name,
                        response.member_epoch
                    );
                    c.id = response.member_id;
                    c.epoch = response.member_epoch;
                    if let Some(a) = response.assignment {
                        c.owned.extend(a.iter().cloned());
                        c.told = a;
                    }
                }
                Some((codes::FENCED_MEMBER_EPOCH | codes::UNKNOWN_MEMBER_ID, _)) => {
                    c.owned.clear();
                    c.told.clear();
                    c.epoch = 0;
                }
                Some((codes::UNRELEASED_INSTANCE_ID, _)) => {}
                Some(e) => panic!("unexpected answer to {}: {e:?}", c.name),
            }
        }

        fn leave(&mut self, i: usize, epoch: i32) {
            let c = self.clients[i].clone();
            if !c.up || c.epoch <= 0 {
                return;
            }
            let response = self.hb(HeartbeatRequest {
                instance_id: c.instance.clone(),
                ..beat(&c.id, epoch, None)
            });
            assert_eq!(response.error, None, "{} leaving", c.name);
            assert_eq!(response.member_epoch, epoch);
            let c = &mut self.clients[i];
            c.up = false;
            c.owned.clear();
            c.told.clear();
        }

        fn crash(&mut self, i: usize) {
            let c = &mut self.clients[i];
            c.up = false;
            c.owned.clear();
            c.told.clear();
        }

        fn restart(&mut self, i: usize) {
            let c = &mut self.clients[i];
            if c.up {
                return;
            }
            c.up = true;
            c.incarnation += 1;
            c.id = format!("{}-{}", c.name, c.incarnation);
            c.epoch = 0;
        }

        /// Every client heartbeats, acknowledging revocations, for `rounds` seconds.
        fn converge(&mut self, rounds: usize) {
            for _ in 0..rounds {
                self.tick(1_000);
                for i in 0..self.clients.len() {
                    self.step(i, true);
                }
            }
        }

        /// No partition held twice, by the coordinator's books or by the clients; a
        /// client consumes only what the coordinator has it hold.
        fn check(&self) {
            let Some(g) = self.groups.groups.get(G) else {
                return;
            };
            let mut held: BTreeMap<TopicPartition, String> = BTreeMap::new();
            for m in g.members.values() {
                assert!(m.assigned.is_disjoint(&m.pending_revocation));
                for tp in m.assigned.iter().chain(&m.pending_revocation) {
                    if let Some(other) = held.insert(tp.clone(), m.id.clone()) {
                        panic!("{tp} held by {other} and {}", m.id);
                    }
                }
                assert!(m.epoch <= g.assignment_epoch, "member ahead of the target");
            }
            assert_eq!(held, g.owners, "owner index out of date");
            assert!(g.assignment_epoch <= g.epoch);
            let mut consumed: BTreeMap<&TopicPartition, &str> = BTreeMap::new();
            for c in self.clients.iter().filter(|c| c.up) {
                for tp in &c.owned {
                    if let Some(other) = consumed.insert(tp, &c.name) {
                        panic!("{tp} consumed by {other} and {}", c.name);
                    }
                    assert_eq!(
                        held.get(tp),
                        Some(&c.id),
                        "{} consumes {tp} the coordinator does not have it hold",
                        c.name
                    );
                }
            }
            let scheduled: usize = self.groups.deadlines.len();
            let members: usize = self.groups.groups.values().map(|g| g.members.len()).sum();
            assert_eq!(scheduled, members, "one deadline per member");
        }

        /// The group is stable: every live client is at the group epoch, consumes its
        /// target, and together they consume every subscribed partition once.
        fn assert_stable(&self, partitions: usize) {
            let g = self.group();
            assert_eq!(g.state(), GroupState::Stable, "{g:#?}");
            let up: Vec<&Client> = self.clients.iter().filter(|c| c.up).collect();
            assert_eq!(g.members.len(), up.len());
            let mut all = BTreeSet::new();
            for c in up {
                assert_eq!(c.epoch, g.epoch, "{} at epoch {}", c.name, c.epoch);
                assert_eq!(c.owned, g.members[&c.id].assigned);
                assert_eq!(c.owned, g.target[&c.id]);
                for tp in &c.owned {
                    assert!(all.insert(tp.clone()), "{tp} twice");
                }
            }
            assert_eq!(all.len(), partitions);
        }
    }

    #[test]
    fn three_members_converge_to_a_full_disjoint_assignment() {
        let mut w = World::new(&[("t", 6)]);
        for name in ["a", "b", "c"] {
            w.add_client(name, false, &["t"], None);
        }
        for round in 0..5 {
            w.tick(1_000);
            for i in 0..3 {
                w.step(i, true);
                w.check();
            }
            if round == 4 {
                w.assert_stable(6);
            }
        }
        for c in &w.clients {
            assert_eq!(c.owned.len(), 2, "{c:?}");
        }
        assert_eq!(w.group().epoch, 3, "one bump per join");
        let d = w.groups.describe(G).unwrap();
        assert_eq!(d.state, "Stable");
        assert_eq!(d.assignor, "sticky");
        assert_eq!(d.members.len(), 3);
        assert!(d
            .members
            .iter()
            .all(|m| m.assignment == m.target_assignment));
    }

    #[test]
    fn a_joining_member_gets_partitions_only_after_their_owner_revokes_them() {
        let mut w = World::new(&[("t", 4)]);
        let r = w.ok(join("a", &["t"]));
        assert_eq!(r.member_epoch, 1);
        assert_eq!(
            r.assignment,
            Some(tps(&[("t", 0), ("t", 1), ("t", 2), ("t", 3)]))
        );
        let all = r.assignment.unwrap();

        // b joins: its target is two of a's partitions, which a still holds.
        let r = w.ok(join("b", &["t"]));
        assert_eq!(r.member_epoch, 2);
        assert_eq!(r.assignment, Some(BTreeSet::new()));
        assert_eq!(w.member("b").state, MemberState::UnreleasedPartitions);
        let b_target = w.group().target["b"].clone();
        assert_eq!(b_target.len(), 2);

        // a is asked to revoke them, and keeps its epoch until it has.
        let r = w.ok(beat("a", 1, Some(all.clone())));
        assert_eq!(r.member_epoch, 1);
        let kept: BTreeSet<_> = all.difference(&b_target).cloned().collect();
        assert_eq!(r.assignment, Some(kept.clone()));
        assert_eq!(w.member("a").state, MemberState::UnrevokedPartitions);
        assert_eq!(w.member("a").pending_revocation, b_target);

        // Until then b gets nothing.
        let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
        assert_eq!(r.assignment, None);
        // a heartbeats still owning them (owned unchanged): still revoking.
        let r = w.ok(beat("a", 1, None));
        assert_eq!((r.member_epoch, r.assignment), (1, None));
        let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
        assert_eq!(r.assignment, None);

        // a acknowledges: it moves to epoch 2, and b gets the partitions.
        let r = w.ok(beat("a", 1, Some(kept.clone())));
        assert_eq!((r.member_epoch, r.assignment), (2, None));
        assert_eq!(w.member("a").state, MemberState::Stable);
        let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
        assert_eq!(r.assignment, Some(b_target));
        assert_eq!(w.member("b").state, MemberState::Stable);
        assert_eq!(w.groups.describe(G).unwrap().state, "Stable");
    }

    #[test]
    fn a_leaving_member_releases_its_partitions_at_once() {
        let mut w = World::new(&[("t", 6)]);
        for name in ["a", "b", "c"] {
            w.add_client(name, false, &["t"], None);
        }
        w.converge(5);
        w.assert_stable(6);
        let epoch = w.group().epoch;
        let c_had = w.clients[2].owned.clone();
        w.leave(2, LEAVE_EPOCH);
        assert_eq!(w.group().epoch, epoch + 1);
        assert!(!w.group().members.contains_key("c-0"));
        // The others take c's partitions on their next heartbeat, no revocation needed.
        w.step(0, true);
        w.step(1, true);
        w.check();
        let taken: BTreeSet<_> = w.clients[0]
            .owned
            .union(&w.clients[1].owned)
            .cloned()
            .collect();
        assert!(c_had.is_subset(&taken));
        w.assert_stable(6);
    }

    #[test]
    fn a_silent_member_is_removed_after_the_session_timeout() {
        let mut w = World::new(&[("t", 4)]);
        w.add_client("a", false, &["t"], None);
        w.add_client("b", false, &["t"], None);
        w.converge(4);
        w.assert_stable(4);
        // b falls silent.
        let last = w.now;
        assert_eq!(w.groups.next_deadline(), Some(last + u64::from(SESSION)));
        w.crash(1);
        let epoch = w.group().epoch;
        let mut expired = Vec::new();
        for _ in 0..9 {
            expired.extend(w.tick(1_000));
            w.step(0, true);
        }
        assert!(expired.is_empty(), "{expired:?}");
        assert_eq!(w.now, last + 9_000);
        expired.extend(w.tick(1_000));
        assert_eq!(
            expired,
            vec![(GroupId::new(G), "b-0".to_owned(), "session timeout")]
        );
        assert_eq!(w.group().epoch, epoch + 1);
        w.step(0, true);
        w.check();
        w.assert_stable(4);
        assert_eq!(w.clients[0].owned.len(), 4);
    }

    #[test]
    fn a_member_that_does_not_revoke_in_time_is_fenced() {
        let mut w = World::new(&[("t", 4)]);
        w.add_client("a", false, &["t"], None);
        w.converge(2);
        w.add_client("b", false, &["t"], None);
        w.step(1, true);
        // a is asked to revoke two partitions but never does.
        w.step(0, false);
        assert_eq!(w.member("a-0").state, MemberState::UnrevokedPartitions);
        let deadline = w.now + REBALANCE as u64;
        assert_eq!(w.groups.next_deadline(), Some(deadline));
        for _ in 0..4 {
            assert!(w.tick(1_000).is_empty());
            w.step(0, false);
            w.step(1, true);
            w.check();
            assert!(w.clients[1].owned.is_empty());
        }
        let expired = w.tick(1_000);
        assert_eq!(
            expired,
            vec![(
                GroupId::new(G),
                "a-0".to_owned(),
                "rebalance timeout: partitions not revoked in time"
            )]
        );
        w.step(1, true);
        w.check();
        assert_eq!(w.clients[1].owned.len(), 4);
        // a's next heartbeat is refused; it rejoins with epoch 0.
        assert_eq!(
            w.code(beat("a-0", 1, Some(BTreeSet::new()))),
            codes::UNKNOWN_MEMBER_ID
        );
        w.converge(4);
        w.assert_stable(4);
    }

    #[test]
    fn wrong_epochs_are_fenced() {
        let mut w = World::new(&[("t", 2)]);
        let r = w.ok(join("a", &["t"]));
        let a_all = r.assignment.unwrap();
        assert_eq!(r.member_epoch, 1);
        assert_eq!(w.code(beat("a", 2, None)), codes::FENCED_MEMBER_EPOCH);
        assert_eq!(w.code(beat("a", -5, None)), codes::INVALID_REQUEST);
        assert_eq!(w.code(beat("nobody", 1, None)), codes::UNKNOWN_MEMBER_ID);
        let missing = HeartbeatRequest {
            group: GroupId::new("missing"),
            ..beat("a", 1, None)
        };
        assert_eq!(w.code(missing), codes::GROUP_ID_NOT_FOUND);

        // b joins; a revokes one partition, acknowledges and moves to epoch 2.
        w.ok(join("b", &["t"]));
        let r = w.ok(beat("a", 1, Some(a_all)));
        let kept = r.assignment.unwrap();
        let r = w.ok(beat("a", 1, Some(kept.clone())));
        assert_eq!(r.member_epoch, 2);
        // The answer may have been lost: the previous epoch with owned partitions within
        // the assignment is accepted...
        let r = w.ok(beat("a", 1, Some(kept.clone())));
        assert_eq!(r.member_epoch, 2);
        // ... but not without owned partitions, nor with partitions outside it.
        assert_eq!(w.code(beat("a", 1, None)), codes::FENCED_MEMBER_EPOCH);
        let other: BTreeSet<_> = [tp("t", 0), tp("t", 1)].into();
        assert_eq!(
            w.code(beat("a", 1, Some(other))),
            codes::FENCED_MEMBER_EPOCH
        );
        // An epoch older than the previous one is fenced.
        w.ok(beat("a", 2, Some(kept.clone())));
        w.set_topic("t", 3);
        w.ok(beat("a", 2, Some(kept.clone())));
        assert_eq!(w.member("a").epoch, 3);
        assert_eq!(w.code(beat("a", 1, Some(kept))), codes::FENCED_MEMBER_EPOCH);
        // The fenced member is still in the group: it rejoins with its id and epoch 0
        // and gets its assignment back.
        let r = w.ok(join("a", &["t"]));
        assert_eq!(r.member_epoch, 3);
        assert_eq!(r.assignment.as_ref(), Some(&w.member("a").assigned));
    }

    #[test]
    fn a_rejoin_with_epoch_zero_is_idempotent() {
        let mut w = World::new(&[("t", 3)]);
        let first = w.ok(join("a", &["t"]));
        let again = w.ok(join("a", &["t"]));
        assert_eq!(first, again);
        assert_eq!(w.group().epoch, 1);
    }

    #[test]
    fn a_static_member_restarted_within_the_session_timeout_gets_its_partitions_back() {
        let mut w = World::new(&[("t", 6)]);
        for name in ["a", "b", "c"] {
            w.add_client(name, true, &["t"], None);
        }
        w.converge(5);
        w.assert_stable(6);
        let epoch = w.group().epoch;
        let before: Vec<(i32, BTreeSet<TopicPartition>)> = w
            .clients
            .iter()
            .map(|c| (c.epoch, c.owned.clone()))
            .collect();

        // a stops with epoch -2: it keeps its place and partitions, no epoch bump.
        w.leave(0, STATIC_LEAVE_EPOCH);
        assert_eq!(w.group().epoch, epoch);
        assert_eq!(w.member("a-0").epoch, STATIC_LEAVE_EPOCH);
        assert_eq!(w.member("a-0").assigned, before[0].1);
        for _ in 0..5 {
            w.tick(1_000);
            w.step(1, true);
            w.step(2, true);
            w.check();
        }
        // It restarts with a new member id and takes over.
        w.restart(0);
        w.step(0, true);
        w.check();
        assert_eq!(w.clients[0].id, "a-1");
        assert_eq!(w.clients[0].owned, before[0].1);
        assert_eq!(w.clients[0].epoch, epoch);
        assert_eq!(w.group().epoch, epoch);
        assert!(!w.group().members.contains_key("a-0"));
        w.converge(3);
        w.assert_stable(6);
        let after: Vec<(i32, BTreeSet<TopicPartition>)> = w
            .clients
            .iter()
            .map(|c| (c.epoch, c.owned.clone()))
            .collect();
        assert_eq!(before, after, "nobody else moved");

        // The old incarnation is fenced by instance id; a second process with the same
        // instance id cannot join while a-1 is there.
        let old = HeartbeatRequest {
            instance_id: Some("a-instance".into()),
            ..beat("a-0", epoch, None)
        };
        assert_eq!(w.code(old.clone()), codes::FENCED_INSTANCE_ID);
        let old_leave = HeartbeatRequest {
            member_epoch: LEAVE_EPOCH,
            ..old
        };
        assert_eq!(w.code(old_leave), codes::FENCED_INSTANCE_ID);
        assert_eq!(
            w.code(static_join("a-2", "a-instance", &["t"])),
            codes::UNRELEASED_INSTANCE_ID
        );
        assert_eq!(
            w.code(beat("x", STATIC_LEAVE_EPOCH, None)),
            codes::INVALID_REQUEST,
            "epoch -2 without an instance id"
        );
        let unknown = HeartbeatRequest {
            instance_id: Some("nobody".into()),
            ..beat("x", 3, None)
        };
        assert_eq!(w.code(unknown), codes::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn a_static_member_taking_over_while_partitions_move_revokes_first() {
        // s holds everything and steps away; meanwhile d joins, so the target moves
        // some of s's partitions to d.
        let mut w = World::new(&[("t", 4)]);
        let r = w.ok(static_join("s-0", "si", &["t"]));
        let all = r.assignment.unwrap();
        w.ok(HeartbeatRequest {
            instance_id: Some("si".into()),
            ..beat("s-0", r.member_epoch, None)
        });
        let r = w.ok(HeartbeatRequest {
            instance_id: Some("si".into()),
            ..beat("s-0", STATIC_LEAVE_EPOCH, None)
        });
        assert_eq!(r.member_epoch, STATIC_LEAVE_EPOCH);
        let r = w.ok(join("d", &["t"]));
        assert_eq!(r.assignment, Some(BTreeSet::new()), "s still holds them");
        let moving = w.group().target["d"].clone();
        assert_eq!(moving.len(), 2);

        // The new incarnation takes over at the old epoch, told to revoke what moves.
        let r = w.ok(static_join("s-1", "si", &["t"]));
        assert_eq!(r.member_epoch, 1, "the old member's epoch, never 0");
        let kept: BTreeSet<_> = all.difference(&moving).cloned().collect();
        assert_eq!(r.assignment, Some(kept.clone()));
        assert_eq!(w.member("s-1").state, MemberState::UnrevokedPartitions);
        assert_eq!(w.member("s-1").pending_revocation, moving);
        // Once it confirms, it moves on and d gets them.
        let r = w.ok(HeartbeatRequest {
            instance_id: Some("si".into()),
            ..beat("s-1", 1, Some(kept))
        });
        assert_eq!(r.member_epoch, 2);
        let r = w.ok(beat("d", 2, Some(BTreeSet::new())));
        assert_eq!(r.assignment, Some(moving));
        assert_eq!(w.groups.describe(G).unwrap().state, "Stable");
    }

    #[test]
    fn a_static_member_that_does_not_come_back_is_removed() {
        let mut w = World::new(&[("t", 4)]);
        w.add_client("a", true, &["t"], None);
        w.add_client("b", true, &["t"], None);
        w.converge(4);
        w.leave(0, STATIC_LEAVE_EPOCH);
        let mut expired = Vec::new();
        for _ in 0..10 {
            expired.extend(w.tick(1_000));
            w.step(1, true);
            w.check();
        }
        assert_eq!(
            expired,
            vec![(
                GroupId::new(G),
                "a-0".to_owned(),
                "static member did not rejoin within the session timeout"
            )]
        );
        w.converge(2);
        w.assert_stable(4);
        // A later restart is a plain join.
        w.restart(0);
        w.converge(4);
        w.assert_stable(4);
    }

    #[test]
    fn regex_subscriptions_follow_topic_creation() {
        let mut w = World::new(&[("orders-1", 2), ("payments", 1), ("__orders", 1)]);
        let r = w.ok(HeartbeatRequest {
            subscribed_topic_names: None,
            subscribed_topic_regex: Some("orders-.*|__orders".into()),
            ..join("a", &[])
        });
        assert_eq!(r.assignment, Some(tps(&[("orders-1", 0), ("orders-1", 1)])));
        assert_eq!(r.member_epoch, 1);
        // Unrelated topics do not bump the epoch.
        w.set_topic("invoices", 3);
        assert_eq!(w.group().epoch, 1);
        // A matching topic does.
        w.set_topic("orders-2", 2);
        assert_eq!(w.group().epoch, 2);
        let r = w.ok(beat("a", 1, Some(tps(&[("orders-1", 0), ("orders-1", 1)]))));
        assert_eq!(r.member_epoch, 2);
        assert_eq!(
            r.assignment,
            Some(tps(&[
                ("orders-1", 0),
                ("orders-1", 1),
                ("orders-2", 0),
                ("orders-2", 1)
            ]))
        );
        // So does a partition count change, and a deletion.
        w.set_topic("orders-2", 3);
        assert_eq!(w.group().epoch, 3);
        w.topics.remove(&TopicName::new("orders-1"));
        w.set_topic("orders-2", 3);
        assert_eq!(w.group().epoch, 4);
        let d = w.groups.describe(G).unwrap();
        assert_eq!(
            d.members[0].subscribed_topic_regex.as_deref(),
            Some("orders-.*|__orders")
        );
        assert_eq!(
            d.members[0].target_assignment,
            tps(&[("orders-2", 0), ("orders-2", 1), ("orders-2", 2)])
        );
        // An invalid pattern is refused; an empty one clears the regex.
        let bad = HeartbeatRequest {
            subscribed_topic_regex: Some("orders-(".into()),
            ..beat("a", 2, None)
        };
        assert_eq!(w.code(bad), codes::INVALID_REGULAR_EXPRESSION);
        let bad_join = HeartbeatRequest {
            subscribed_topic_regex: Some("(".into()),
            ..join("z", &[])
        };
        assert_eq!(w.code(bad_join), codes::INVALID_REGULAR_EXPRESSION);
        let clear = HeartbeatRequest {
            subscribed_topic_regex: Some(String::new()),
            ..beat("a", 2, None)
        };
        let r = w.ok(clear);
        assert_eq!(w.group().epoch, 5);
        assert_eq!(r.member_epoch, 2, "revoking first");
        assert!(w.groups.describe(G).unwrap().members[0]
            .subscribed_topic_regex
            .is_none());
    }

    #[test]
    fn server_assignors_are_chosen_by_name() {
        let mut w = World::new(&[("t", 4), ("u", 4)]);
        // A name that is not loaded falls back to the default assignor.
        let r = w.ok(HeartbeatRequest {
            server_assignor: Some("cooperative-sticky".into()),
            ..join("a", &["t"])
        });
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(
            (
                w.default_assignor,
                w.groups.describe(G).unwrap().assignor.as_str()
            ),
            ("uniform", "sticky"),
            "the default assignor (`uniform`, Kafka's name for our sticky) runs"
        );
        w.ok(HeartbeatRequest {
            member_epoch: LEAVE_EPOCH,
            ..join("a", &["t"])
        });

        w.ok(HeartbeatRequest {
            server_assignor: Some("range".into()),
            ..join("a", &["t", "u"])
        });
        w.ok(HeartbeatRequest {
            server_assignor: Some("range".into()),
            ..join("b", &["t", "u"])
        });
        let d = w.groups.describe(G).unwrap();
        assert_eq!(d.assignor, "range");
        // Range: each member gets a contiguous half of each topic.
        assert_eq!(
            d.members[0].target_assignment,
            tps(&[("t", 0), ("t", 1), ("u", 0), ("u", 1)])
        );
        // `uniform` is our sticky; with both members asking for it the group switches.
        for id in ["a", "b"] {
            let epoch = w.member(id).epoch;
            w.ok(HeartbeatRequest {
                server_assignor: Some("uniform".into()),
                ..beat(id, epoch, None)
            });
        }
        assert_eq!(w.groups.describe(G).unwrap().assignor, "sticky");
        assert_eq!(w.member("a").server_assignor.as_deref(), Some("sticky"));
    }

    #[test]
    fn a_failing_assignor_is_retried() {
        let mut w = World::new(&[("t", 2)]);
        w.default_assignor = "broken";
        let r = w.ok(join("a", &["t"]));
        assert_eq!(r.assignment, Some(BTreeSet::new()));
        assert_eq!(
            r.member_epoch, 1,
            "the empty previous target, at the group epoch"
        );
        assert_eq!(w.groups.describe(G).unwrap().state, "Assigning");
        assert_eq!(w.groups.list(), vec![(GroupId::new(G), "Assigning")]);
        // Retried once per heartbeat interval: here it still fails.
        w.tick(1_000);
        let r = w.ok(beat("a", 1, Some(BTreeSet::new())));
        assert_eq!((r.member_epoch, r.assignment), (1, None));
        // It works again: the next retry installs a target at a new epoch.
        w.default_assignor = "sticky";
        w.tick(500);
        let r = w.ok(beat("a", 1, Some(BTreeSet::new())));
        assert_eq!((r.member_epoch, r.assignment), (1, None), "not due yet");
        w.tick(500);
        let r = w.ok(beat("a", 1, Some(BTreeSet::new())));
        assert_eq!(r.member_epoch, 2);
        assert_eq!(r.assignment, Some(tps(&[("t", 0), ("t", 1)])));
        assert_eq!(w.groups.describe(G).unwrap().state, "Stable");
    }

    #[test]
    fn a_failed_assignor_keeps_the_previous_target() {
        let mut w = World::new(&[("t", 4)]);
        w.add_client("a", false, &["t"], None);
        w.add_client("b", false, &["t"], None);
        w.converge(3);
        w.assert_stable(4);
        let before = w.group().target.clone();
        // The assignor breaks; b leaves: its partitions are dropped from the target,
        // a keeps its own.
        w.default_assignor = "broken";
        w.leave(1, LEAVE_EPOCH);
        assert_eq!(w.groups.describe(G).unwrap().state, "Assigning");
        assert_eq!(w.group().target["a-0"], before["a-0"]);
        assert!(!w.group().target.contains_key("b-0"));
        w.step(0, true);
        assert_eq!(w.clients[0].owned, before["a-0"]);
        w.default_assignor = "sticky";
        w.converge(2);
        w.assert_stable(4);
    }

    #[test]
    fn the_group_size_is_limited() {
        let mut w = World::new(&[("t", 2)]);
        w.max_group_size = 2;
        w.ok(static_join("a", "ia", &["t"]));
        w.ok(join("b", &["t"]));
        assert_eq!(w.code(join("c", &["t"])), codes::GROUP_MAX_SIZE_REACHED);
        // Members already in the group go on; a static member's replacement fits.
        let epoch = w.member("b").epoch;
        w.ok(beat("b", epoch, None));
        w.ok(HeartbeatRequest {
            instance_id: Some("ia".into()),
            ..beat("a", STATIC_LEAVE_EPOCH, None)
        });
        w.ok(static_join("a2", "ia", &["t"]));
        assert_eq!(w.group().members.len(), 2);
    }

    #[test]
    fn commit_and_fetch_checks() {
        let mut w = World::new(&[("t", 2)]);
        // No such group: a standalone commit is allowed, a member's is not.
        assert_eq!(w.groups.check_commit(G, "", -1), Ok(()));
        assert_eq!(
            w.groups.check_commit(G, "a", 1),
            Err(codes::GROUP_ID_NOT_FOUND)
        );
        assert_eq!(w.groups.check_fetch(G, Some("a"), 1), Ok(()));

        let r = w.ok(join("a", &["t"]));
        let epoch = r.member_epoch;
        assert_eq!(w.groups.check_commit(G, "a", epoch), Ok(()));
        assert_eq!(
            w.groups.check_commit(G, "a", epoch - 1),
            Err(codes::STALE_MEMBER_EPOCH)
        );
        assert_eq!(
            w.groups.check_commit(G, "a", epoch + 1),
            Err(codes::STALE_MEMBER_EPOCH)
        );
        assert_eq!(
            w.groups.check_commit(G, "b", epoch),
            Err(codes::UNKNOWN_MEMBER_ID)
        );
        assert_eq!(
            w.groups.check_commit(G, "", -1),
            Err(codes::UNKNOWN_MEMBER_ID)
        );
        assert_eq!(w.groups.check_fetch(G, None, -1), Ok(()));
        assert_eq!(w.groups.check_fetch(G, Some("a"), epoch), Ok(()));
        assert_eq!(
            w.groups.check_fetch(G, Some("a"), 0),
            Err(codes::STALE_MEMBER_EPOCH)
        );
        assert_eq!(
            w.groups.check_fetch(G, Some("b"), 1),
            Err(codes::UNKNOWN_MEMBER_ID)
        );

        // Once the group is empty, standalone commits are allowed again.
        w.ok(beat("a", LEAVE_EPOCH, None));
        assert_eq!(w.groups.check_commit(G, "", -1), Ok(()));
        assert_eq!(
            w.groups.check_commit(G, "a", epoch),
            Err(codes::UNKNOWN_MEMBER_ID)
        );
    }

    #[test]
    fn malformed_requests_are_invalid() {
        let mut w = World::new(&[("t", 2)]);
        let cases: Vec<(&str, HeartbeatRequest)> = vec![
            ("v1 without a member id", join("", &["t"])),
            (
                "a blank group id",
                HeartbeatRequest {
                    group: GroupId::new(" "),
                    ..join("a", &["t"])
                },
            ),
            (
                "a blank instance id",
                HeartbeatRequest {
                    instance_id: Some(String::new()),
                    ..join("a", &["t"])
                },
            ),
            (
                "a blank rack id",
                HeartbeatRequest {
                    rack_id: Some("\t".into()),
                    ..join("a", &["t"])
                },
            ),
            (
                "a join without a rebalance timeout",
                HeartbeatRequest {
                    rebalance_timeout_ms: -1,
                    ..join("a", &["t"])
                },
            ),
            (
                "a join owning partitions",
                HeartbeatRequest {
                    owned_partitions: Some(tps(&[("t", 0)])),
                    ..join("a", &["t"])
                },
            ),
            (
                "a join without owned partitions",
                HeartbeatRequest {
                    owned_partitions: None,
                    ..join("a", &["t"])
                },
            ),
            (
                "a join without a subscription",
                HeartbeatRequest {
                    subscribed_topic_names: None,
                    ..join("a", &[])
                },
            ),
            ("an epoch below -2", beat("a", -3, None)),
            (
                "a heartbeat without a member id",
                HeartbeatRequest {
                    version: 0,
                    ..beat("", 3, None)
                },
            ),
            (
                "a leave without a member id",
                HeartbeatRequest {
                    version: 0,
                    ..beat("", LEAVE_EPOCH, None)
                },
            ),
            (
                "a negative rebalance timeout",
                HeartbeatRequest {
                    rebalance_timeout_ms: -7,
                    ..join("a", &["t"])
                },
            ),
        ];
        for (what, req) in cases {
            let r = w.hb(req);
            assert_eq!(r.error.map(|e| e.0), Some(codes::INVALID_REQUEST), "{what}");
            assert_eq!(r.assignment, None);
        }
        assert!(!w.groups.contains(G));
        // An empty list of names is a valid (empty) subscription.
        let r = w.ok(join("a", &[]));
        assert_eq!(r.assignment, Some(BTreeSet::new()));
    }

    #[test]
    fn v0_joins_get_generated_member_ids() {
        let mut w = World::new(&[("t", 2)]);
        let v0 = |id: &str| HeartbeatRequest {
            version: 0,
            ..join(id, &["t"])
        };
        let a = w.ok(v0(""));
        let b = w.ok(v0(""));
        assert_eq!(a.member_id, "drover-member-1");
        assert_eq!(b.member_id, "drover-member-2");
        // A v0 member may also name itself.
        let c = w.ok(v0("mine"));
        assert_eq!(c.member_id, "mine");
        assert_eq!(w.group().members.len(), 3);
    }

    #[test]
    fn describe_list_and_delete() {
        let mut w = World::new(&[("t", 2)]);
        assert_eq!(w.groups.describe(G), None);
        assert_eq!(w.groups.delete(G), Err(codes::GROUP_ID_NOT_FOUND));
        w.ok(HeartbeatRequest {
            rack_id: Some("rack-1".into()),
            ..static_join("a", "ia", &["t"])
        });
        let d = w.groups.describe(G).unwrap();
        assert_eq!(d.group_epoch, 1);
        assert_eq!(d.assignment_epoch, 1);
        let m = &d.members[0];
        assert_eq!(m.member_id, "a");
        assert_eq!(m.instance_id.as_deref(), Some("ia"));
        assert_eq!(m.rack_id.as_deref(), Some("rack-1"));
        assert_eq!(
            (m.client_id.as_str(), m.client_host.as_str()),
            ("client", "/127.0.0.1")
        );
        assert_eq!(m.member_epoch, 1);
        assert_eq!(m.state, "stable");
        assert_eq!(m.subscribed_topic_names, vec![TopicName::new("t")]);
        assert_eq!(m.assignment, tps(&[("t", 0), ("t", 1)]));
        assert_eq!(w.groups.list(), vec![(GroupId::new(G), "Stable")]);
        assert_eq!(w.groups.delete(G), Err(codes::NON_EMPTY_GROUP));
        w.ok(HeartbeatRequest {
            instance_id: Some("ia".into()),
            ..beat("a", LEAVE_EPOCH, None)
        });
        assert_eq!(w.groups.list(), vec![(GroupId::new(G), "Empty")]);
        assert_eq!(w.groups.describe(G).unwrap().group_epoch, 2);
        assert_eq!(w.groups.next_deadline(), None);
        assert_eq!(w.groups.delete(G), Ok(()));
        assert_eq!(w.groups.describe(G), None);
        assert_eq!(w.groups.delete(G), Err(codes::GROUP_ID_NOT_FOUND));
        // Leaving a missing group or as an unknown member.
        assert_eq!(
            w.code(beat("a", LEAVE_EPOCH, None)),
            codes::GROUP_ID_NOT_FOUND
        );
        w.ok(join("b", &["t"]));
        assert_eq!(
            w.code(beat("a", LEAVE_EPOCH, None)),
            codes::UNKNOWN_MEMBER_ID
        );
    }

    #[test]
    fn the_assignment_is_sent_on_full_requests_and_changes_only() {
        let mut w = World::new(&[("t", 2)]);
        let r = w.ok(join("a", &["t"]));
        let all = r.assignment.unwrap();
        let r = w.ok(beat("a", 1, Some(all.clone())));
        assert_eq!(r.assignment, None);
        // A full request (after an error on the client, say) gets it again.
        let full = HeartbeatRequest {
            member_epoch: 1,
            owned_partitions: Some(all.clone()),
            ..join("a", &["t"])
        };
        assert_eq!(w.ok(full).assignment, Some(all));
    }

    /// What the randomized test does.
    #[derive(Debug, Clone)]
    enum Op {
        /// Client heartbeats; `true`: completing revocations first.
        Beat(usize, bool),
        Leave(usize),
        StaticLeave(usize),
        Crash(usize),
        Restart(usize),
        Tick(u64),
        AddPartition,
        CreateTopic,
    }

    fn op() -> impl Strategy<Value = Op> {
        let client = 0..5usize;
        prop_oneof![
            12 => (client.clone(), prop::bool::weighted(0.7)).prop_map(|(c, ack)| Op::Beat(c, ack)),
            1 => client.clone().prop_map(Op::Leave),
            1 => client.clone().prop_map(Op::StaticLeave),
            1 => client.clone().prop_map(Op::Crash),
            2 => client.prop_map(Op::Restart),
            4 => (0..4_000u64).prop_map(Op::Tick),
            1 => Just(Op::AddPartition),
            1 => Just(Op::CreateTopic),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Random joins, heartbeats (revoking promptly or not), leaves, crashes,
        /// restarts, expiries and topic changes: after every step no partition is held
        /// by two members nor consumed by two clients, and in the end the group
        /// converges to a full, disjoint assignment at one epoch.
        #[test]
        fn no_partition_is_ever_held_twice(ops in prop::collection::vec(op(), 1..120)) {
            let mut w = World::new(&[("t", 5)]);
            w.add_client("d0", false, &["t", "t2"], None);
            w.add_client("d1", false, &["t", "t2"], None);
            w.add_client("s0", true, &[], Some("t|t2"));
            w.add_client("s1", true, &[], Some("t.*"));
            w.add_client("d2", false, &["t"], Some("t2"));
            for op in ops {
                match op {
                    Op::Beat(i, ack) => w.step(i, ack),
                    Op::Leave(i) => w.leave(i, LEAVE_EPOCH),
                    Op::StaticLeave(i) => {
                        if w.clients[i].instance.is_some() {
                            w.leave(i, STATIC_LEAVE_EPOCH);
                        }
                    }
                    Op::Crash(i) => w.crash(i),
                    Op::Restart(i) => w.restart(i),
                    Op::Tick(ms) => {
                        w.tick(ms);
                    }
                    Op::AddPartition => {
                        let n = w.topics[&TopicName::new("t")];
                        w.set_topic("t", n + 1);
                    }
                    Op::CreateTopic => {
                        let n = w.topics.get(&TopicName::new("t2")).copied().unwrap_or(0);
                        w.set_topic("t2", n + 2);
                    }
                }
                w.check();
            }
            for i in 0..w.clients.len() {
                w.restart(i);
            }
            w.converge(40);
            w.check();
            let total = w.topics.values().map(|&n| n as usize).sum();
            w.assert_stable(total);
        }
    }
}
