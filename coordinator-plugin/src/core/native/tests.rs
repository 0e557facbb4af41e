//! Tests of the native group as a pure state machine: driven through a [`NativeEnv`]
//! and judged by the [`Effects`] it records, with no coordinator around it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use drover_abi::assignor::{AssignInput, Assignment, MemberAssignment};
use drover_abi::std_types::RVec;
use drover_abi::{PluginError, TopicPartitions};

use super::effects::NativeEnv;
use super::group::{Member, NativeGroup};
use crate::assignors::Assignors;
use crate::config::CoordinatorConfig;
use crate::core::conn::Conn;
use crate::core::ctx::OpIds;
use crate::core::result::{Effect, Effects};
use crate::core::TimerKey;
use crate::io::Event;
use crate::subscription::SubscriptionSpec;
use crate::types::{ConnId, ConsumerId, Generation, GroupId, OpId, TopicName, TopicPartition};

/// `first`: every partition of the input to the member with the smallest id.
struct First;

impl Assignors for First {
    fn contains(&self, name: &str) -> bool {
        name == "first"
    }

    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        if name != "first" {
            return Err(PluginError::invalid_input(format!("no assignor {name}")));
        }
        let mut members = input
            .members
            .iter()
            .map(|m| m.member_id.clone())
            .collect::<Vec<_>>();
        members.sort();
        let topics = input
            .topics
            .iter()
            .map(|t| TopicPartitions {
                topic: t.name.clone(),
                partitions: (0..t.partitions as i32).collect::<Vec<_>>().into(),
            })
            .collect::<Vec<_>>();
        let members = members
            .into_iter()
            .enumerate()
            .map(|(i, member_id)| MemberAssignment {
                member_id,
                partitions: if i == 0 {
                    topics.clone().into()
                } else {
                    RVec::new()
                },
            })
            .collect::<Vec<_>>();
        Ok(Assignment {
            members: members.into(),
        })
    }
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition {
        topic: TopicName::new("t"),
        partition,
    }
}

fn member(id: &str, conn: u64, now: u64) -> Member {
    let topics: BTreeSet<TopicName> = [TopicName::new("t")].into_iter().collect();
    Member {
        id: ConsumerId::new(id),
        incarnation: conn,
        conn: ConnId(conn),
        host: "test".into(),
        session_timeout_ms: 30_000,
        heartbeat_interval_ms: 10_000,
        subscription: SubscriptionSpec::Static(vec![(TopicName::new("t"), 1)]),
        topics: Arc::new(topics),
        auto_offset_reset: 0,
        assignor: "first".into(),
        data: drover_protocol::MemberData::default(),
        generation: Generation(0),
        owned: BTreeSet::new(),
        stopped_in_rebalance: BTreeSet::new(),
        last_recv_ms: now,
        last_sent_ms: now,
        ping_early_ms: 0,
        next_corr: 0,
        outstanding: None,
        queued_stop: None,
        queued_start: None,
    }
}

/// What a group reads: one topic `t` of two partitions, the `first` assignor, idle
/// connections 1 and 2, no batch in flight.
struct World {
    config: CoordinatorConfig,
    topics: BTreeMap<TopicName, u32>,
    stats: crate::PartitionStats,
    conns: HashMap<ConnId, Conn>,
    op_ids: OpIds,
}

impl World {
    fn new() -> Self {
        World {
            config: CoordinatorConfig {
                default_assignor: "first".into(),
                ..CoordinatorConfig::default()
            },
            topics: [(TopicName::new("t"), 2)].into_iter().collect(),
            stats: crate::PartitionStats::default(),
            conns: [(ConnId(1), Conn::default()), (ConnId(2), Conn::default())]
                .into_iter()
                .collect(),
            op_ids: OpIds::default(),
        }
    }

    /// Runs `f` at `now` and returns what it decided.
    fn call(
        &mut self,
        now: u64,
        g: &mut NativeGroup,
        f: impl FnOnce(&mut NativeGroup, &NativeEnv<'_>, &mut Effects<'_>),
    ) -> Vec<Effect> {
        let calls = crate::core::assigning::AssignorCalls::default();
        let env = NativeEnv::new(
            now,
            &self.config,
            &self.topics,
            &self.stats,
            crate::core::assigning::GroupAssignors::new(&First, &calls),
            &self.conns,
            false,
        );
        let mut fx = Effects::new(Vec::new(), &mut self.op_ids);
        f(g, &env, &mut fx);
        fx.finish(()).effects
    }
}

#[test]
fn a_rebalance_decides_a_fetch_of_start_offsets_then_starts_the_round_on_its_result() {
    let mut w = World::new();
    let mut g = NativeGroup::new(GroupId::new("g"), None);

    let joined = w.call(0, &mut g, |g, env, fx| g.join(env, fx, member("c1", 1, 0)));
    assert!(joined
        .iter()
        .any(|e| matches!(e, Effect::Event(Event::MemberRegistered { .. }))));
    assert!(joined.iter().any(
        |e| matches!(e, Effect::Timer(TimerKey::Member(_, id), Some(_)) if id.as_str() == "c1")
    ));
    assert!(!joined.iter().any(|e| matches!(e, Effect::Push { .. })));

    // The rebalance is due after the quiet time (the first member waits it too, so
    // that members started with it share the first generation).
    assert!(fetch_op(&joined).is_none());
    let due = g.due.expect("a rebalance is due");
    assert_eq!(due, w.config.rebalance_quiet_ms);

    // The timer fires: the target gives c1 both partitions, which nobody holds, so
    // the group reads their committed offsets under an id of the lent counter.
    let fetched = w.call(due, &mut g, |g, env, fx| g.on_timer(env, fx));
    let fetches: Vec<(OpId, Vec<TopicPartition>)> = fetched
        .iter()
        .filter_map(|e| match e {
            Effect::FetchStartOffsets { op, partitions, .. } => Some((*op, partitions.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(fetches, vec![(OpId(1), vec![tp(0), tp(1)])]);
    assert!(!fetched.iter().any(|e| matches!(e, Effect::Push { .. })));

    // A result of another operation is not this fetch's.
    let stray = w.call(due, &mut g, |g, env, fx| {
        g.on_fetched(env, fx, OpId(7), Ok(BTreeMap::new()));
    });
    assert!(!stray.iter().any(|e| matches!(e, Effect::Push { .. })));
    assert!(g.in_rebalance());

    // The offsets arrive: a new generation, and a StartFetcher on c1's channel, from
    // which c1 owns both partitions.
    let offsets = [(tp(0), 5)].into_iter().collect();
    let started = w.call(due, &mut g, |g, env, fx| {
        g.on_fetched(env, fx, OpId(1), Ok(offsets));
    });
    assert!(started
        .iter()
        .any(|e| matches!(e, Effect::Push { conn, .. } if *conn == ConnId(1))));
    assert!(started.iter().any(|e| matches!(
        e,
        Effect::Event(Event::GenerationStarted { generation, members: 1, .. })
            if *generation == Generation(1)
    )));
    let c1 = &g.members[&ConsumerId::new("c1")];
    assert_eq!(c1.owned, [tp(0), tp(1)].into_iter().collect());
}

#[test]
fn a_member_on_a_busy_connection_gets_no_request_until_it_is_idle() {
    let mut w = World::new();
    // An answer still waits on connection 1: its channel may not carry a request.
    w.conns
        .get_mut(&ConnId(1))
        .expect("connection 1")
        .reserve(ConnId(1));
    let mut g = NativeGroup::new(GroupId::new("g"), None);
    w.call(0, &mut g, |g, env, fx| g.join(env, fx, member("c1", 1, 0)));
    let due = g.due.expect("a rebalance is due");
    let fetched = w.call(due, &mut g, |g, env, fx| g.on_timer(env, fx));
    let op = fetched
        .iter()
        .find_map(|e| match e {
            Effect::FetchStartOffsets { op, .. } => Some(*op),
            _ => None,
        })
        .expect("a fetch of start offsets");
    let started = w.call(due, &mut g, |g, env, fx| {
        g.on_fetched(env, fx, op, Ok(BTreeMap::new()));
    });
    assert!(!started.iter().any(|e| matches!(e, Effect::Push { .. })));
    // The StartFetcher waits for the channel; the member's timer is its session
    // deadline only (no Heartbeat is due on a busy channel).
    let c1 = &g.members[&ConsumerId::new("c1")];
    assert!(c1.queued_start.is_some());
    assert!(started.iter().any(|e| matches!(
        e,
        Effect::Timer(TimerKey::Member(..), Some(at)) if *at == c1.session_deadline()
    )));
}

#[test]
fn the_debounce_is_the_quiet_time_for_a_lone_trigger_and_grows_with_a_stream() {
    use super::group::debounce_ms;
    // quiet 50, cap 300: the group's first trigger, and one long after the previous.
    assert_eq!(debounce_ms(50, 300, None), 50);
    assert_eq!(debounce_ms(50, 300, Some(300)), 50);
    assert_eq!(debounce_ms(50, 300, Some(10_000)), 50);
    // A burst: the quiet time.
    assert_eq!(debounce_ms(50, 300, Some(0)), 50);
    assert_eq!(debounce_ms(50, 300, Some(20)), 50);
    // A stream: twice the spacing, capped by rebalance_delay_ms.
    assert_eq!(debounce_ms(50, 300, Some(100)), 200);
    assert_eq!(debounce_ms(50, 300, Some(200)), 300);
    // rebalance_delay_ms 0 starts at once; a quiet time at or above it is the fixed
    // debounce of rebalance_delay_ms.
    assert_eq!(debounce_ms(50, 0, Some(5)), 0);
    assert_eq!(debounce_ms(300, 300, None), 300);
    assert_eq!(debounce_ms(500, 300, Some(1)), 300);
}

/// The `FetchStartOffsets` operation among `effects`, if any.
fn fetch_op(effects: &[Effect]) -> Option<OpId> {
    effects.iter().find_map(|e| match e {
        Effect::FetchStartOffsets { op, .. } => Some(*op),
        _ => None,
    })
}

/// c1, the first member, joins at 0: its rebalance waits the quiet time like any
/// trigger's, then its StartFetcher (no offsets committed) goes out, giving it both
/// partitions.
fn c1_started(w: &mut World, g: &mut NativeGroup) {
    let joined = w.call(0, g, |g, env, fx| g.join(env, fx, member("c1", 1, 0)));
    assert_eq!(
        fetch_op(&joined),
        None,
        "the first member waits the quiet time"
    );
    let due = w.config.rebalance_quiet_ms;
    assert_eq!(g.due, Some(due));
    let fired = w.call(due, g, |g, env, fx| g.on_timer(env, fx));
    let op = fetch_op(&fired).expect("the rebalance starts after the quiet time");
    let started = w.call(due, g, |g, env, fx| {
        g.on_fetched(env, fx, op, Ok(BTreeMap::new()))
    });
    assert!(started
        .iter()
        .any(|e| matches!(e, Effect::Push { conn, .. } if *conn == ConnId(1))));
}

/// Members started together (c1 at 0, c2 at 10 ms) share the first generation: the
/// first member's rebalance waits the quiet time, and c2 joins within it, so one
/// assignment covers both (with a lone first member started at once, c1 took every
/// partition at generation 1 and a second round followed for c2).
#[test]
fn members_starting_together_share_the_first_generation() {
    let mut w = World::new();
    let mut g = NativeGroup::new(GroupId::new("g"), None);
    let joined = w.call(0, &mut g, |g, env, fx| g.join(env, fx, member("c1", 1, 0)));
    assert_eq!(fetch_op(&joined), None);
    let joined = w.call(10, &mut g, |g, env, fx| {
        g.join(env, fx, member("c2", 2, 10))
    });
    assert_eq!(fetch_op(&joined), None);
    let due = g.due.expect("a rebalance is due");
    assert_eq!(due, 10 + w.config.rebalance_quiet_ms);
    let fired = w.call(due, &mut g, |g, env, fx| g.on_timer(env, fx));
    let op = fetch_op(&fired).expect("the rebalance starts");
    let started = w.call(due, &mut g, |g, env, fx| {
        g.on_fetched(env, fx, op, Ok(BTreeMap::new()))
    });
    // The first generation's StartFetcher round goes to both members.
    for conn in [ConnId(1), ConnId(2)] {
        assert!(
            started
                .iter()
                .any(|e| matches!(e, Effect::Push { conn: c, .. } if *c == conn)),
            "no StartFetcher on {conn:?}"
        );
    }
}

#[test]
fn a_second_joiner_waits_the_quiet_time_and_a_stream_of_joiners_waits_longer() {
    let mut w = World::new();
    let mut g = NativeGroup::new(GroupId::new("g"), None);
    c1_started(&mut w, &mut g);
    assert_eq!(g.members[&ConsumerId::new("c1")].owned.len(), 2);
    // c2 joins at 1000, long after the previous trigger: the rebalance is due after
    // the quiet time only.
    w.call(1_000, &mut g, |g, env, fx| {
        g.join(env, fx, member("c2", 2, 1_000))
    });
    assert_eq!(g.due, Some(1_000 + w.config.rebalance_quiet_ms));
    // A third joiner 100 ms later: a stream, so twice the spacing.
    let mut c3 = member("c3", 3, 1_100);
    c3.conn = ConnId(2);
    w.call(1_100, &mut g, |g, env, fx| g.join(env, fx, c3));
    assert_eq!(g.due, Some(1_100 + 200));
}

/// A drift re-run (`rerun_on_drift_ms`) of a stable group whose assignor gives the
/// assignment in force does nothing: no rebalance due, no generation, no request to
/// any member. Once the assignor's answer differs (here: a topic grew, so the target
/// has a partition c1 does not own), the re-run triggers the usual rebalance.
#[test]
fn a_drift_rerun_that_moves_nothing_starts_no_generation() {
    let mut w = World::new();
    let mut g = NativeGroup::new(GroupId::new("g"), None);
    c1_started(&mut w, &mut g);
    let c1 = ConsumerId::new("c1");
    let at = w.config.rebalance_quiet_ms;
    w.call(at, &mut g, |g, env, fx| g.on_started(env, fx, &c1));
    assert!(!g.in_rebalance());
    let generation = g.generation;

    let rerun = w.call(5_000, &mut g, |g, env, fx| {
        assert!(!g.rerun_on_drift(env, fx));
        g.progress(env, fx);
    });
    assert_eq!(g.due, None, "no rebalance due");
    assert!(!g.in_rebalance());
    assert_eq!(g.generation, generation);
    assert!(!rerun.iter().any(|e| matches!(e, Effect::Push { .. })));

    w.topics.insert(TopicName::new("t"), 3);
    w.call(6_000, &mut g, |g, env, fx| {
        assert!(g.rerun_on_drift(env, fx))
    });
    assert_eq!(g.due, Some(6_000 + w.config.rebalance_quiet_ms));
}
