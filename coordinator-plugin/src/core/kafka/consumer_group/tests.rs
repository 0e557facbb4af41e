//! Tests of the KIP-848 engine: validation, fencing, reconciliation, static members,
//! timeouts, assignor failures, and property tests of its invariants.

use super::group::{ConsumerGroup, GroupState};
use super::member::{Member, MemberState};
use super::*;
use crate::assignors::Assignors;
use crate::core::assigning::AssignorCalls;
use crate::core::commits::{CommitApi, CommitAuthor};
use crate::core::ctx::OpIds;
use crate::core::result::Effect;
use crate::core::TimerKey;
use crate::timers::Timers;
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
    let subscribed = |i: usize, topic: &str| members[i].topics.iter().any(|t| t.as_str() == topic);
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
                Some(&i) if subscribed(i, tp.0) && result[i].len() < quota => result[i].push(tp),
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

/// [`ASSIGNORS`] as the host runs plugins: their calls handed out
/// (`Assignors::runner`), their results delivered later by the test ([`World::deliver`]).
struct Threaded;

impl Assignors for Threaded {
    fn contains(&self, name: &str) -> bool {
        ASSIGNORS.contains(name)
    }

    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        ASSIGNORS.assign(name, input)
    }

    fn runner(&self, name: &str) -> Option<crate::AssignorRunner> {
        let name = name.to_owned();
        Some(std::sync::Arc::new(move |input, _| {
            ASSIGNORS.assign(&name, input)
        }))
    }
}

static THREADED: Threaded = Threaded;

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

/// The [`Env`] of a call on world `$w`: a macro, not a method, so that the call can
/// borrow the world's group table and timers mutably beside it.
macro_rules! world_env {
    ($w:expr) => {
        Env {
            now: $w.now,
            topics: &$w.topics,
            partition_stats: &$w.stats,
            assignors: GroupAssignors::new($w.assignors, &$w.calls),
            default_assignor: $w.default_assignor,
            session_timeout_ms: SESSION,
            heartbeat_interval_ms: $w.heartbeat_interval_ms,
            reconcile_heartbeat_interval_ms: 200,
            rebalance_settle_ms: $w.settle_ms,
            assignment_interval_ms: $w.assignment_interval_ms,
            max_group_size: $w.max_group_size,
            conn: None,
            scope: None,
            fallbacks: std::cell::Cell::new(0),
            failures: std::cell::Cell::new(0),
        }
    };
}

/// Runs `f` with an empty effect list and applies the timer changes it records to
/// `timers`, in order (what `Ctx::apply` does with them); other effects (counters) are
/// dropped.
fn with_timers<R>(timers: &mut Timers<TimerKey>, f: impl FnOnce(&mut Effects<'_>) -> R) -> R {
    let mut ids = OpIds::default();
    let mut fx = Effects::new(Vec::new(), &mut ids);
    let response = f(&mut fx);
    let result = fx.finish(response);
    for effect in result.effects {
        if let Effect::Timer(key, at) = effect {
            timers.set(key, at);
        }
    }
    result.response
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

/// A coordinator, its timer table, its topics, virtual time and simulated clients of
/// group `g`.
struct World {
    groups: ConsumerGroups,
    /// The coordinator's one group table (only KIP-848 groups here).
    table: Groups,
    /// The coordinator's timer table (only KIP-848 members' deadlines here).
    timers: Timers<TimerKey>,
    topics: BTreeMap<TopicName, u32>,
    stats: crate::PartitionStats,
    now: u64,
    max_group_size: usize,
    default_assignor: &'static str,
    clients: Vec<Client>,
    /// Assignor fallbacks counted by every heartbeat so far.
    fallbacks: u64,
    /// Assignor failures counted by every heartbeat so far.
    failures: u64,
    /// `consumer_heartbeat_interval_ms` (1000 unless a test sets it).
    heartbeat_interval_ms: u32,
    /// `consumer_rebalance_settle_ms` (0 unless a test sets it).
    settle_ms: u32,
    /// `Env::assignment_interval_ms`: 0 (every bump assigns at once) unless a test sets it.
    assignment_interval_ms: u32,
    /// The assignors: [`ASSIGNORS`] (called inline) unless a test sets [`THREADED`].
    assignors: &'static (dyn Assignors + Sync),
    /// Assignor calls handed out, and those in flight.
    calls: AssignorCalls,
    /// Calls handed out whose results the test has not delivered yet.
    jobs: Vec<crate::AssignorJob>,
}

impl World {
    fn new(topics: &[(&str, u32)]) -> Self {
        World {
            groups: ConsumerGroups::default(),
            table: Groups::default(),
            timers: Timers::default(),
            topics: topics
                .iter()
                .map(|(t, n)| (TopicName::new(t), *n))
                .collect(),
            stats: crate::PartitionStats::default(),
            now: 1_000,
            max_group_size: 100,
            fallbacks: 0,
            failures: 0,
            heartbeat_interval_ms: 1_000,
            settle_ms: 0,
            assignment_interval_ms: 0,
            default_assignor: "uniform",
            clients: Vec::new(),
            assignors: &ASSIGNORS,
            calls: AssignorCalls::default(),
            jobs: Vec::new(),
        }
    }

    /// Takes the assignor calls started by the last operation.
    fn collect_jobs(&mut self) {
        self.jobs.extend(self.calls.take_started());
    }

    /// Runs assignor call `k` (modulo those waiting) and delivers its result, as the
    /// host would; nothing when none waits.
    fn deliver(&mut self, k: usize) {
        if self.jobs.is_empty() {
            return;
        }
        let job = self.jobs.remove(k % self.jobs.len());
        let result = job.run();
        let group = self.calls.finished(job.id()).expect("a call handed out");
        let env = world_env!(self);
        self.groups
            .assignor_done(&mut self.table, &env, &group, job.id(), result);
        self.collect_jobs();
    }

    fn hb(&mut self, req: HeartbeatRequest) -> HeartbeatResponse {
        let env = world_env!(self);
        let (groups, table) = (&mut self.groups, &mut self.table);
        let response = with_timers(&mut self.timers, |fx| {
            groups.heartbeat(table, &env, fx, req)
        });
        self.fallbacks += env.fallbacks.get();
        self.failures += env.failures.get();
        self.collect_jobs();
        // Shorter than the reconciliation interval (200) only for a member waiting for
        // partitions others hold (a quarter of it at least) or for a target that
        // waits for the assignment interval.
        let shortest = if self.assignment_interval_ms > 0 {
            1
        } else {
            50
        };
        assert!((shortest..=self.heartbeat_interval_ms as i32)
            .contains(&response.heartbeat_interval_ms));
        response
    }

    fn ok(&mut self, req: HeartbeatRequest) -> HeartbeatResponse {
        let response = self.hb(req);
        assert_eq!(response.error, None);
        response
    }

    fn code(&mut self, req: HeartbeatRequest) -> ResponseError {
        self.hb(req).error.expect("an error").0
    }

    fn set_topic(&mut self, topic: &str, partitions: u32) {
        self.topics.insert(TopicName::new(topic), partitions);
        let env = world_env!(self);
        self.groups.topics_changed(&mut self.table, &env);
        self.collect_jobs();
    }

    /// Advances time and expires; a fenced client stops consuming (its own timers
    /// would have stopped it) and rejoins.
    fn tick(&mut self, ms: u64) -> Vec<(GroupId, String, &'static str)> {
        self.now += ms;
        let env = world_env!(self);
        let mut due = Vec::new();
        while let Some(key) = self.timers.pop_due(self.now) {
            match key {
                TimerKey::ConsumerMember(group, id) => due.push((group, id)),
                other => panic!("not a KIP-848 member's timer: {other:?}"),
            }
        }
        let (groups, table) = (&mut self.groups, &mut self.table);
        let expired = with_timers(&mut self.timers, |fx| groups.expire(table, &env, fx, due));
        self.collect_jobs();
        for (_, id, _) in &expired {
            for c in self.clients.iter_mut().filter(|c| c.up && c.id == *id) {
                c.owned.clear();
                c.told.clear();
                c.epoch = 0;
            }
        }
        expired
    }

    fn group(&self) -> &ConsumerGroup {
        self.table.consumer(G).expect("the group")
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
            Some((ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId, _)) => {
                c.owned.clear();
                c.told.clear();
                c.epoch = 0;
            }
            Some((ResponseError::UnreleasedInstanceId, _)) => {}
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
            while !self.jobs.is_empty() {
                self.deliver(0);
            }
            for i in 0..self.clients.len() {
                self.step(i, true);
            }
        }
    }

    /// No partition held twice, by the coordinator's books or by the clients; a
    /// client consumes only what the coordinator has it hold.
    fn check(&self) {
        let Some(g) = self.table.consumer(G) else {
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
        let scheduled: usize = self.timers.len();
        let members: usize = self
            .table
            .iter()
            .map(|(_, g)| match g {
                crate::core::groups::Group::Consumer(g) => g.members.len(),
                _ => 0,
            })
            .sum();
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
    let d = w.groups.describe(&w.table, G).unwrap();
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
    assert_eq!(w.groups.describe(&w.table, G).unwrap().state, "Stable");
}

/// The interval in each answer follows the member's reconciliation: the short one
/// (200 here) while it has partitions to revoke or to receive and when the answer
/// changes its assignment, the normal one (1000 here) once it is reconciled, and on
/// errors.
#[test]
fn the_heartbeat_interval_is_short_while_a_member_reconciles() {
    const SHORT: i32 = 200;
    const NORMAL: i32 = 1_000;
    let mut w = World::new(&[("t", 4)]);
    // a joins and is given every partition: it acknowledges them soon.
    let r = w.ok(join("a", &["t"]));
    assert_eq!(
        (
            r.assignment.as_ref().map(|a| a.len()),
            r.heartbeat_interval_ms
        ),
        (Some(4), SHORT)
    );
    let all = r.assignment.unwrap();
    let r = w.ok(beat("a", 1, Some(all.clone())));
    assert_eq!((r.assignment, r.heartbeat_interval_ms), (None, NORMAL));

    // b joins: it waits for partitions a holds, and a, told the normal interval just
    // now, learns to revoke them at its next heartbeat: b comes back then (at most
    // the normal interval).
    let r = w.ok(join("b", &["t"]));
    assert_eq!(r.heartbeat_interval_ms, NORMAL);
    // a, stable until now at the normal interval, is asked to revoke: short.
    let r = w.ok(beat("a", 1, Some(all.clone())));
    assert_eq!(w.member("a").state, MemberState::UnrevokedPartitions);
    assert_eq!(r.heartbeat_interval_ms, SHORT);
    let kept = r.assignment.unwrap();
    // Still revoking, nothing new told: still short.
    let r = w.ok(beat("a", 1, None));
    assert_eq!((r.assignment, r.heartbeat_interval_ms), (None, SHORT));
    // b still waits: a's next heartbeat is due in SHORT, then a quarter of SHORT for
    // its acknowledgement.
    let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
    assert_eq!(
        (r.assignment, r.heartbeat_interval_ms),
        (None, SHORT + SHORT / 4)
    );
    // a has revoked: stable at epoch 2, nothing new: normal.
    let r = w.ok(beat("a", 1, Some(kept.clone())));
    assert_eq!((r.member_epoch, r.heartbeat_interval_ms), (2, NORMAL));
    // b receives its partitions (short), acknowledges them (normal).
    let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
    assert_eq!(r.heartbeat_interval_ms, SHORT);
    let got = r.assignment.unwrap();
    assert_eq!(got.len(), 2);
    let r = w.ok(beat("b", 2, Some(got)));
    assert_eq!((r.assignment, r.heartbeat_interval_ms), (None, NORMAL));
    let r = w.ok(beat("a", 2, Some(kept)));
    assert_eq!((r.assignment, r.heartbeat_interval_ms), (None, NORMAL));

    // An error answer carries the normal interval.
    let r = w.hb(beat("a", 7, None));
    assert_eq!(r.error.map(|e| e.0), Some(ResponseError::FencedMemberEpoch));
    assert_eq!(r.heartbeat_interval_ms, NORMAL);
}

/// Scale-out on virtual time: a joins a stable group at 1000 and acknowledges at once
/// (told the normal interval, 1000, so its next heartbeat is due at 2000). b joins at
/// 1300 and waits for partitions a holds: it is told to come back at a's next
/// heartbeat plus a quarter of the short interval (750, at 2050), not every 200 ms
/// with nothing to take. a learns to revoke at 2000 and acknowledges at 2030; b's next
/// heartbeat, at 2050, gets the partitions: one heartbeat of b in between, not five.
#[test]
fn a_member_waiting_for_held_partitions_comes_back_at_the_holders_next_heartbeat() {
    let mut w = World::new(&[("t", 4)]);
    let all = w.ok(join("a", &["t"])).assignment.unwrap();
    let r = w.ok(beat("a", 1, Some(all.clone())));
    assert_eq!(r.heartbeat_interval_ms, 1_000);

    w.tick(300);
    let r = w.ok(join("b", &["t"]));
    assert_eq!(w.member("b").state, MemberState::UnreleasedPartitions);
    assert_eq!(r.heartbeat_interval_ms, 750);

    w.tick(700);
    let r = w.ok(beat("a", 1, Some(all)));
    assert_eq!(w.member("a").state, MemberState::UnrevokedPartitions);
    assert_eq!(r.heartbeat_interval_ms, 200);
    let kept = r.assignment.unwrap();
    w.tick(30);
    w.ok(beat("a", 1, Some(kept)));
    w.tick(20);
    let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
    assert_eq!(r.assignment.map(|a| a.len()), Some(2));
}

/// The same scale-out with a 30 s normal interval: b is told to come back after at
/// most five short intervals (1000 ms), not at a's next regular heartbeat 30 s away,
/// because a may come earlier (here at once, as a client acknowledging after its
/// assignment callback does) and release the partitions then.
#[test]
fn a_waiting_member_is_never_told_to_stay_away_longer_than_five_short_intervals() {
    let mut w = World::new(&[("t", 4)]);
    w.heartbeat_interval_ms = 30_000;
    let all = w.ok(join("a", &["t"])).assignment.unwrap();
    let r = w.ok(beat("a", 1, Some(all.clone())));
    assert_eq!(r.heartbeat_interval_ms, 30_000);

    w.tick(300);
    let r = w.ok(join("b", &["t"]));
    assert_eq!(w.member("b").state, MemberState::UnreleasedPartitions);
    assert_eq!(r.heartbeat_interval_ms, 1_000);

    // a heartbeats early, learns to revoke and acknowledges: b's next heartbeat, a
    // second after its join, takes the partitions.
    w.tick(100);
    let kept = w.ok(beat("a", 1, Some(all))).assignment.unwrap();
    w.tick(100);
    w.ok(beat("a", 1, Some(kept)));
    w.tick(800);
    let r = w.ok(beat("b", 2, Some(BTreeSet::new())));
    assert_eq!(r.assignment.map(|a| a.len()), Some(2));
}

/// A rollout: a joins at 1000 and reconciles at once, b joins 300 ms later. With
/// `consumer_rebalance_settle_ms` 1000, a is told the short interval even though it
/// is reconciled, because the target changed moments ago: it comes back 200 ms later,
/// learns it must give partitions to b, and the group is balanced within a second
/// (with the normal interval, a would have slept until b's partitions were due — 1 s
/// here, 5 s with Kafka's default). Once no target changed for the settle time, a
/// reconciled member gets the normal interval again.
#[test]
fn reconciled_members_heartbeat_at_the_short_interval_while_the_group_settles() {
    let mut w = World::new(&[("t", 4)]);
    w.settle_ms = 1_000;
    let all = w.ok(join("a", &["t"])).assignment.unwrap();
    let r = w.ok(beat("a", 1, Some(all.clone())));
    assert_eq!(w.member("a").state, MemberState::Stable);
    assert_eq!(r.heartbeat_interval_ms, 200, "the group is settling");

    w.tick(200);
    w.ok(join("b", &["t"]));
    w.tick(200);
    let r = w.ok(beat("a", 1, Some(all)));
    assert_eq!(w.member("a").state, MemberState::UnrevokedPartitions);
    let kept = r.assignment.unwrap();
    assert_eq!(kept.len(), 2);
    w.tick(200);
    let r = w.ok(beat("a", r.member_epoch, Some(kept.clone())));
    assert_eq!(
        r.heartbeat_interval_ms, 200,
        "still settling: b joined 400 ms ago"
    );

    // 1000 ms after b's join, no target change since: back to the normal interval.
    w.tick(1_000);
    let r = w.ok(beat("a", r.member_epoch, Some(kept)));
    assert_eq!(w.member("a").state, MemberState::Stable);
    assert_eq!(r.heartbeat_interval_ms, 1_000);
}

#[test]
fn joins_faster_than_the_assignment_interval_share_one_assignor_run() {
    let mut w = World::new(&[("t", 200)]);
    w.assignment_interval_ms = 1_000;
    // The first nine joins: a group of under ten has an interval under 1 ms, so each
    // runs the assignor at once.
    for k in 0..9 {
        w.ok(join(&format!("m{k:02}"), &["t"]));
    }
    assert_eq!(w.group().assignment_epoch, 9);
    // Then 100 µs per member: joins in the same millisecond wait for it.
    for k in 9..50 {
        let r = w.ok(join(&format!("m{k:02}"), &["t"]));
        assert!(
            r.heartbeat_interval_ms <= 5,
            "told to come back when the target is due: {r:?}"
        );
        assert_eq!(r.member_epoch, 9, "reconciled to the target in force");
    }
    let g = w.group();
    assert_eq!((g.epoch, g.assignment_epoch), (50, 9));
    // Due 1 ms after the last run, as fixed by the first join that waited (a group of
    // ten): the forty joins since did not push it back.
    assert_eq!(g.due_at, Some(w.now + 1));
    assert_eq!(g.state(), super::group::GroupState::Assigning);
    // The next heartbeat once it is due runs it once for all.
    w.tick(1);
    w.ok(beat("m49", 9, Some(BTreeSet::new())));
    let g = w.group();
    assert_eq!((g.epoch, g.assignment_epoch), (50, 50));
    assert_eq!(g.target.len(), 50, "every member in the one new target");
    w.check();
    // Off (0): every join runs it at once.
    let mut w = World::new(&[("t", 200)]);
    for k in 0..50 {
        w.ok(join(&format!("m{k:02}"), &["t"]));
    }
    assert_eq!(w.group().assignment_epoch, 50);
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
    assert_eq!(w.timers.next(), Some(last + u64::from(SESSION)));
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
    assert_eq!(w.timers.next(), Some(deadline));
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
        ResponseError::UnknownMemberId
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
    assert_eq!(w.code(beat("a", 2, None)), ResponseError::FencedMemberEpoch);
    assert_eq!(w.code(beat("a", -5, None)), ResponseError::InvalidRequest);
    assert_eq!(
        w.code(beat("nobody", 1, None)),
        ResponseError::UnknownMemberId
    );
    let missing = HeartbeatRequest {
        group: GroupId::new("missing"),
        ..beat("a", 1, None)
    };
    // A heartbeat for a group this coordinator does not have (after a fail-over):
    // UNKNOWN_MEMBER_ID, so the member rejoins at epoch 0, never the GROUP_ID_NOT_FOUND
    // that librdkafka treats as fatal.
    assert_eq!(w.code(missing), ResponseError::UnknownMemberId);

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
    assert_eq!(w.code(beat("a", 1, None)), ResponseError::FencedMemberEpoch);
    let other: BTreeSet<_> = [tp("t", 0), tp("t", 1)].into();
    assert_eq!(
        w.code(beat("a", 1, Some(other))),
        ResponseError::FencedMemberEpoch
    );
    // An epoch older than the previous one is fenced.
    w.ok(beat("a", 2, Some(kept.clone())));
    w.set_topic("t", 3);
    w.ok(beat("a", 2, Some(kept.clone())));
    assert_eq!(w.member("a").epoch, 3);
    assert_eq!(
        w.code(beat("a", 1, Some(kept))),
        ResponseError::FencedMemberEpoch
    );
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
    assert_eq!(w.code(old.clone()), ResponseError::FencedInstanceId);
    let old_leave = HeartbeatRequest {
        member_epoch: LEAVE_EPOCH,
        ..old
    };
    assert_eq!(w.code(old_leave), ResponseError::FencedInstanceId);
    assert_eq!(
        w.code(static_join("a-2", "a-instance", &["t"])),
        ResponseError::UnreleasedInstanceId
    );
    assert_eq!(
        w.code(beat("x", STATIC_LEAVE_EPOCH, None)),
        ResponseError::InvalidRequest,
        "epoch -2 without an instance id"
    );
    let unknown = HeartbeatRequest {
        instance_id: Some("nobody".into()),
        ..beat("x", 3, None)
    };
    assert_eq!(w.code(unknown), ResponseError::UnknownMemberId);
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
    assert_eq!(w.groups.describe(&w.table, G).unwrap().state, "Stable");
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
    let d = w.groups.describe(&w.table, G).unwrap();
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
    assert_eq!(w.code(bad), ResponseError::InvalidRegularExpression);
    let bad_join = HeartbeatRequest {
        subscribed_topic_regex: Some("(".into()),
        ..join("z", &[])
    };
    assert_eq!(w.code(bad_join), ResponseError::InvalidRegularExpression);
    let clear = HeartbeatRequest {
        subscribed_topic_regex: Some(String::new()),
        ..beat("a", 2, None)
    };
    let r = w.ok(clear);
    assert_eq!(w.group().epoch, 5);
    assert_eq!(r.member_epoch, 2, "revoking first");
    assert!(w.groups.describe(&w.table, G).unwrap().members[0]
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
            w.groups.describe(&w.table, G).unwrap().assignor.as_str()
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
    let d = w.groups.describe(&w.table, G).unwrap();
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
    assert_eq!(w.groups.describe(&w.table, G).unwrap().assignor, "sticky");
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
    assert_eq!(w.groups.describe(&w.table, G).unwrap().state, "Assigning");
    assert_eq!(listed(&w), vec![(GroupId::new(G), "Assigning")]);
    // Counted as a failure (issue 28 item 7: it stayed 0 for KIP-848 groups); the
    // default itself failed, so there is nothing to fall back to.
    assert_eq!((w.failures, w.fallbacks), (1, 0));
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
    assert_eq!(w.groups.describe(&w.table, G).unwrap().state, "Stable");
}

#[test]
fn a_failing_named_assignor_counts_a_failure_and_a_fallback() {
    let mut w = World::new(&[("t", 2)]);
    let r = w.ok(HeartbeatRequest {
        server_assignor: Some("broken".into()),
        ..join("a", &["t"])
    });
    assert_eq!(
        r.assignment,
        Some(tps(&[("t", 0), ("t", 1)])),
        "the default ran"
    );
    assert_eq!((w.failures, w.fallbacks), (1, 1));
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
    assert_eq!(w.groups.describe(&w.table, G).unwrap().state, "Assigning");
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
    assert_eq!(
        w.code(join("c", &["t"])),
        ResponseError::GroupMaxSizeReached
    );
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

/// The groups and their states as ListGroups shows them (their summaries).
fn listed(w: &World) -> Vec<(GroupId, &'static str)> {
    w.table
        .iter()
        .map(|(id, g)| (id.clone(), g.summary().state))
        .collect()
}

/// The group-level check of an OffsetCommit v9 to group `G` by `member_id` at `epoch`,
/// as the coordinator makes it ([`Groups::validate_offset_commit`]).
fn commit_check(w: &World, member_id: &str, epoch: i32) -> Result<(), ResponseError> {
    let author = CommitAuthor {
        member_id,
        instance_id: None,
        generation: epoch,
        api: CommitApi::Kafka { version: 9 },
    };
    w.table.validate_offset_commit(G, &author).map(|_| ())
}

/// The group-level check of an OffsetFetch v9 of group `G` by `member_id` at `epoch`,
/// as the coordinator makes it ([`Groups::validate_offset_fetch`]).
fn fetch_check(w: &World, member_id: Option<&str>, epoch: i32) -> Result<(), ResponseError> {
    w.table.validate_offset_fetch(G, Some((member_id, epoch)))
}

#[test]
fn commit_and_fetch_checks() {
    let mut w = World::new(&[("t", 2)]);
    // No such group: a standalone commit is allowed, a member's is not.
    assert_eq!(commit_check(&w, "", -1), Ok(()));
    assert_eq!(
        commit_check(&w, "a", 1),
        Err(ResponseError::GroupIdNotFound)
    );
    assert_eq!(fetch_check(&w, Some("a"), 1), Ok(()));

    let r = w.ok(join("a", &["t"]));
    let epoch = r.member_epoch;
    assert_eq!(commit_check(&w, "a", epoch), Ok(()));
    assert_eq!(
        commit_check(&w, "a", epoch - 1),
        Err(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        commit_check(&w, "a", epoch + 1),
        Err(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        commit_check(&w, "b", epoch),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        commit_check(&w, "", -1),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(fetch_check(&w, None, -1), Ok(()));
    assert_eq!(fetch_check(&w, Some("a"), epoch), Ok(()));
    assert_eq!(
        fetch_check(&w, Some("a"), 0),
        Err(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        fetch_check(&w, Some("b"), 1),
        Err(ResponseError::UnknownMemberId)
    );

    // Once the group is empty, standalone commits are allowed again.
    w.ok(beat("a", LEAVE_EPOCH, None));
    assert_eq!(commit_check(&w, "", -1), Ok(()));
    assert_eq!(
        commit_check(&w, "a", epoch),
        Err(ResponseError::UnknownMemberId)
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
        assert_eq!(
            r.error.map(|e| e.0),
            Some(ResponseError::InvalidRequest),
            "{what}"
        );
        assert_eq!(r.assignment, None);
    }
    assert!(w.table.consumer(G).is_none());
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
    assert_eq!(w.groups.describe(&w.table, G), None);
    assert_eq!(
        w.groups.delete(&mut w.table, G),
        Err(ResponseError::GroupIdNotFound)
    );
    w.ok(HeartbeatRequest {
        rack_id: Some("rack-1".into()),
        ..static_join("a", "ia", &["t"])
    });
    let d = w.groups.describe(&w.table, G).unwrap();
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
    assert_eq!(listed(&w), vec![(GroupId::new(G), "Stable")]);
    assert_eq!(
        w.groups.delete(&mut w.table, G),
        Err(ResponseError::NonEmptyGroup)
    );
    w.ok(HeartbeatRequest {
        instance_id: Some("ia".into()),
        ..beat("a", LEAVE_EPOCH, None)
    });
    assert_eq!(listed(&w), vec![(GroupId::new(G), "Empty")]);
    assert_eq!(w.groups.describe(&w.table, G).unwrap().group_epoch, 2);
    assert_eq!(w.timers.next(), None);
    assert_eq!(w.groups.delete(&mut w.table, G), Ok(()));
    assert_eq!(w.groups.describe(&w.table, G), None);
    assert_eq!(
        w.groups.delete(&mut w.table, G),
        Err(ResponseError::GroupIdNotFound)
    );
    // Leaving a missing group or as an unknown member.
    assert_eq!(
        w.code(beat("a", LEAVE_EPOCH, None)),
        ResponseError::GroupIdNotFound
    );
    w.ok(join("b", &["t"]));
    assert_eq!(
        w.code(beat("a", LEAVE_EPOCH, None)),
        ResponseError::UnknownMemberId
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
    /// The result of an assignor call handed out comes back (threaded assignors).
    Deliver(usize),
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
        3 => (0..4usize).prop_map(Op::Deliver),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random joins, heartbeats (revoking promptly or not), leaves, crashes,
    /// restarts, expiries, topic changes and (half the cases) assignor results that
    /// come back late: after every step no partition is held
    /// by two members nor consumed by two clients, and in the end the group
    /// converges to a full, disjoint assignment at one epoch.
    #[test]
    fn no_partition_is_ever_held_twice(
        ops in prop::collection::vec(op(), 1..120),
        threaded in prop::bool::ANY,
    ) {
        let mut w = World::new(&[("t", 5)]);
        if threaded {
            // Assignor calls run as the host runs plugins': their results come back
            // later, interleaved with everything else (coordinator ABI 3.6).
            w.assignors = &THREADED;
        }
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
                Op::Deliver(k) => w.deliver(k),
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

#[test]
fn a_changed_rack_is_a_new_group_epoch_and_the_same_one_is_not() {
    let mut w = World::new(&[("t", 2)]);
    let r = w.ok(HeartbeatRequest {
        rack_id: Some("r1".into()),
        ..join("a", &["t"])
    });
    assert_eq!(w.group().epoch, 1);
    assert_eq!(w.member("a").rack_id.as_deref(), Some("r1"));
    let same = w.ok(HeartbeatRequest {
        rack_id: Some("r1".into()),
        ..beat("a", r.member_epoch, None)
    });
    assert_eq!(w.group().epoch, 1, "an unchanged rack bumps nothing");
    w.ok(HeartbeatRequest {
        rack_id: Some("r2".into()),
        ..beat("a", same.member_epoch, None)
    });
    assert_eq!(
        w.group().epoch,
        2,
        "assignors see racks: a new rack, a new target"
    );
    assert_eq!(w.member("a").rack_id.as_deref(), Some("r2"));
}

/// A rack longer than a native consumer's (255 bytes) is INVALID_REQUEST: the rack is
/// kept per member and handed to every assignor run. 255 bytes are accepted.
#[test]
fn a_rack_over_255_bytes_is_refused() {
    let mut w = World::new(&[("t", 2)]);
    let mut r = join("a", &["t"]);
    r.rack_id = Some("r".repeat(256));
    assert_eq!(w.code(r), ResponseError::InvalidRequest);
    let mut r = join("a", &["t"]);
    r.rack_id = Some("r".repeat(255));
    w.ok(r);
}

/// Each new target is a rebalance in the group's history (issue 32's timeline,
/// DescribeRebalances): a second member's join moves partitions and lasts from its
/// epoch bump until every member has reconciled; a member whose session expired is
/// the next one's cause; a heartbeat that changes nothing records nothing.
#[test]
fn rebalances_are_recorded_with_cause_moves_and_duration() {
    use drover_protocol::RebalanceRecord as R;
    let mut w = World::new(&[("t", 4)]);
    let all = w.ok(join("a", &["t"])).assignment.expect("everything");
    let first = w.group().history().to_wire(w.now);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].cause, R::JOIN);
    assert_eq!((first[0].generation, first[0].members), (1, 1));
    assert_eq!(
        first[0].partitions_moved, 4,
        "four partitions gained an owner"
    );
    assert_eq!(first[0].duration_ms, 0, "a holds its target at once");
    assert_eq!(first[0].assignor.as_deref(), Some("sticky"));

    // b joins at 1100: two of a's partitions move, once a has revoked them.
    w.now = 1_100;
    w.ok(join("b", &["t"]));
    let b_target = w.group().target["b"].clone();
    let running = &w.group().history().to_wire(w.now)[1];
    assert_eq!(running.cause, R::JOIN);
    assert_eq!((running.generation, running.members), (2, 2));
    assert_eq!((running.partitions_moved, running.duration_ms), (2, -1));
    w.now = 1_200;
    let kept = w.ok(beat("a", 1, Some(all))).assignment.expect("revoke");
    w.now = 1_300;
    w.ok(beat("a", 1, Some(kept.clone())));
    assert_eq!(
        w.group().history().to_wire(w.now)[1].duration_ms,
        -1,
        "b has nothing yet"
    );
    w.now = 1_400;
    let got = w.ok(beat("b", 2, Some(BTreeSet::new()))).assignment;
    assert_eq!(got, Some(b_target.clone()));
    let done = &w.group().history().to_wire(w.now)[1];
    assert_eq!((done.duration_ms, done.age_ms), (300, 300));

    // Steady heartbeats record nothing.
    w.now = 2_000;
    w.ok(beat("a", 2, Some(kept)));
    w.ok(beat("b", 2, Some(b_target)));
    assert_eq!(w.group().history().to_wire(w.now).len(), 2);

    // b falls silent: its session expires at 12,000 and a takes its partitions.
    w.now = 11_000;
    w.ok(beat("a", 2, None));
    let expired = w.tick(1_000);
    assert_eq!(expired.len(), 1, "{expired:?}");
    let history = w.group().history().to_wire(w.now);
    assert_eq!(history.len(), 3);
    let expiry = &history[2];
    assert_eq!(expiry.cause, R::SESSION_EXPIRY);
    assert_eq!((expiry.generation, expiry.members), (3, 1));
    assert_eq!(expiry.partitions_moved, 2, "b's two partitions go to a");
    assert_eq!(expiry.duration_ms, -1, "a has not taken them yet");
    w.now += 100;
    let r = w.ok(beat("a", 2, None));
    assert_eq!(r.assignment.map(|a| a.len()), Some(4));
    let expiry = &w.group().history().to_wire(w.now)[2];
    assert_eq!(expiry.duration_ms, 100);
}
