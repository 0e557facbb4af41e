//! How the core calls assignors: synchronously, by name, through [`Assignors`].
//!
//! The cdylib wrapper passes the loaded plugins as an [`AssignorSet`] of
//! `drover_abi::assignor::AssignorArc`s; tests pass in-process implementations. The
//! core never trusts an assignor's output: it checks it (coverage, no partition twice, no
//! partition outside a member's subscription) before using it; a bad output counts as a
//! failure of the assignor, retried after `retry_backoff_ms`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use drover_abi::assignor::{
    AssignContext, AssignContextRef, AssignInput, Assignment, AssignorArc, AssignorMember,
    BrokerContext, MemberContext, MemberLabel, PartitionContext, TopicContext,
};
use drover_abi::std_types::{RSlice, RSome, RString, RVec};
use drover_abi::{PluginError, TopicInfo, TopicPartitions};

use crate::assignor_job::AssignorRunner;
use crate::partition_stats::PartitionStats;
use crate::seen_loads::{SeenLoad, TopicSeenLoads};
use crate::types::{ConsumerId, TopicName, TopicPartition};

/// The assignors the coordinator may use, by name.
pub trait Assignors {
    /// Whether an assignor of that name is loaded.
    fn contains(&self, name: &str) -> bool;
    /// Runs assignor `name`. An unknown name is an error.
    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError>;

    /// Runs assignor `name` with `context` (assignor ABI 3.1). The default drops the
    /// context and calls [`assign`](Self::assign) (in-process test assignors);
    /// [`AssignorSet`] passes it on, and an assignor built against ABI 3.0 gets a plain
    /// `assign` from the ABI's default.
    fn assign_with_context(
        &self,
        name: &str,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        let _ = context;
        self.assign(name, input)
    }

    /// Assignor `name` as a call that may run on another thread, if this set offers
    /// one: the coordinator then hands its calls to the host
    /// ([`Output::RunAssignor`](crate::Output::RunAssignor)) instead of making them
    /// inside `handle`. The default, `None`, keeps calls inline (in-process test
    /// assignors); [`AssignorSet`] always offers one for a loaded assignor.
    fn runner(&self, name: &str) -> Option<AssignorRunner> {
        let _ = name;
        None
    }

    /// Whether assignor `name` is loaded and serves share groups (assignor ABI 3.3,
    /// `Assignor::share_groups_supported`). The default, `false`, keeps share groups on
    /// the in-tree `simple` assignor; an assignor built before 3.3 answers `false`.
    fn share_groups_supported(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Runs share assignor `name` (assignor ABI 3.3, `Assignor::assign_share`): the
    /// share-assignor contract, a partition possibly to several members. The default
    /// answers `Unsupported`.
    fn assign_share(
        &self,
        name: &str,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        let _ = (input, context);
        Err(PluginError::unsupported(format!(
            "assignor `{name}` does not serve share groups"
        )))
    }

    /// Share assignor `name` as a call that may run on another thread (see
    /// [`runner`](Self::runner)); `None` keeps calls inline.
    fn share_runner(&self, name: &str) -> Option<AssignorRunner> {
        let _ = name;
        None
    }
}

/// Loaded assignor plugins by name.
#[derive(Clone, Default)]
pub struct AssignorSet {
    assignors: BTreeMap<String, AssignorArc>,
}

impl AssignorSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) assignor `name`.
    pub fn insert(&mut self, name: impl Into<String>, assignor: AssignorArc) {
        self.assignors.insert(name.into(), assignor);
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.assignors.keys().map(String::as_str)
    }

    /// Assignor `name`. Errors: `InvalidInput` when none of that name is loaded.
    fn named(&self, name: &str) -> Result<&AssignorArc, PluginError> {
        self.assignors.get(name).ok_or_else(|| {
            PluginError::invalid_input(format!("no assignor named `{name}` is loaded"))
        })
    }
}

impl FromIterator<drover_abi::coordinator::NamedAssignor> for AssignorSet {
    fn from_iter<I: IntoIterator<Item = drover_abi::coordinator::NamedAssignor>>(iter: I) -> Self {
        let mut set = AssignorSet::new();
        for named in iter {
            set.insert(named.name.to_string(), named.assignor);
        }
        set
    }
}

impl Assignors for AssignorSet {
    fn contains(&self, name: &str) -> bool {
        self.assignors.contains_key(name)
    }

    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.named(name)?.assign(input).into_result()
    }

    fn assign_with_context(
        &self,
        name: &str,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        self.named(name)?
            .assign_with_context(input, context)
            .into_result()
    }

    fn runner(&self, name: &str) -> Option<AssignorRunner> {
        let assignor = self.assignors.get(name)?.clone();
        Some(Arc::new(move |input, context| {
            assignor.assign_with_context(input, context).into_result()
        }))
    }

    fn share_groups_supported(&self, name: &str) -> bool {
        self.assignors
            .get(name)
            .is_some_and(|a| a.share_groups_supported())
    }

    fn assign_share(
        &self,
        name: &str,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        self.named(name)?.assign_share(input, context).into_result()
    }

    fn share_runner(&self, name: &str) -> Option<AssignorRunner> {
        let assignor = self.assignors.get(name)?.clone();
        Some(Arc::new(move |input, context| {
            assignor.assign_share(input, context).into_result()
        }))
    }
}

impl<A: Assignors + ?Sized> Assignors for Box<A> {
    fn contains(&self, name: &str) -> bool {
        (**self).contains(name)
    }
    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        (**self).assign(name, input)
    }
    fn assign_with_context(
        &self,
        name: &str,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        (**self).assign_with_context(name, input, context)
    }
    fn runner(&self, name: &str) -> Option<AssignorRunner> {
        (**self).runner(name)
    }
    fn share_groups_supported(&self, name: &str) -> bool {
        (**self).share_groups_supported(name)
    }
    fn assign_share(
        &self,
        name: &str,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        (**self).assign_share(name, input, context)
    }
    fn share_runner(&self, name: &str) -> Option<AssignorRunner> {
        (**self).share_runner(name)
    }
}

/// One member as the core hands it to an assignor.
pub(crate) struct MemberView<'a> {
    pub id: &'a ConsumerId,
    pub topics: &'a BTreeSet<TopicName>,
    pub owned: &'a BTreeSet<TopicPartition>,
    /// The member's rack (native RegisterConsumer v1 `rack`, KIP-848 `RackId`).
    pub rack: Option<&'a str>,
    /// Its relative capacity, ≥ 1 (native RegisterConsumer v1 `weight`; 1 otherwise).
    pub weight: u32,
    /// Its labels (native RegisterConsumer v1 `labels`; none otherwise).
    pub labels: &'a [drover_protocol::Label],
}

impl<'a> MemberView<'a> {
    /// A member of a Kafka-protocol group (KIP-848, share): weight 1 and no labels,
    /// which those protocols have no field for (docs/plugins.md); `rack` is its
    /// `RackId`.
    pub(crate) fn kafka(
        id: &'a ConsumerId,
        topics: &'a BTreeSet<TopicName>,
        owned: &'a BTreeSet<TopicPartition>,
        rack: Option<&'a str>,
    ) -> Self {
        MemberView {
            id,
            topics,
            owned,
            rack,
            weight: 1,
            labels: &[],
        }
    }
}

/// Groups a sorted set of partitions by topic, in the ABI's shape.
pub(crate) fn to_abi_partitions<'a>(
    tps: impl IntoIterator<Item = &'a TopicPartition>,
) -> RVec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for tp in tps {
        match out.last_mut() {
            Some(last) if last.topic.as_str() == tp.topic.as_str() => {
                last.partitions.push(tp.partition)
            }
            _ => out.push(TopicPartitions::new(
                RString::from(tp.topic.as_str()),
                vec![tp.partition],
            )),
        }
    }
    out.into()
}

/// Builds the assignor input: members in id order with their existing subscribed
/// topics and owned partitions; the partition counts of every subscribed topic.
pub(crate) fn build_input(
    group: &str,
    members: &[MemberView<'_>],
    topics: &BTreeMap<TopicName, u32>,
) -> AssignInput {
    let mut used: BTreeSet<&TopicName> = BTreeSet::new();
    // Members that share one subscription set (a homogeneous group's members share the
    // resolved set) get copies of one list, computed once.
    let mut lists: HashMap<*const BTreeSet<TopicName>, RVec<RString>> = HashMap::new();
    let members = members
        .iter()
        .map(|m| {
            let subscribed = lists
                .entry(std::ptr::from_ref(m.topics))
                .or_insert_with(|| {
                    m.topics
                        .iter()
                        .filter(|t| topics.contains_key(*t))
                        .map(|t| {
                            used.insert(t);
                            RString::from(t.as_str())
                        })
                        .collect()
                })
                .clone();
            AssignorMember {
                member_id: RString::from(m.id.as_str()),
                topics: subscribed,
                owned: to_abi_partitions(m.owned.iter()),
                rack: m.rack.map(RString::from).into(),
                weight: m.weight.max(1),
            }
        })
        .collect::<Vec<_>>();
    let topic_infos = used
        .into_iter()
        .map(|t| TopicInfo::new(t.as_str(), topics[t]))
        .collect::<Vec<_>>();
    AssignInput {
        group: RString::from(group),
        members: members.into(),
        topics: topic_infos.into(),
    }
}

/// What the coordinator knows besides the input, in the shape of an
/// [`AssignContext`] (assignor ABI 3.1): members' labels; per partition of a subscribed
/// topic the host's data from the latest [`PartitionStats`] (leader, log start and end
/// offsets, produce rates) and the group's committed offset (the last one it accepted);
/// the racks of the leaders named.
#[derive(Debug, Default)]
pub(crate) struct ContextParts {
    members: Vec<MemberContext>,
    brokers: Vec<BrokerContext>,
    topics: Vec<TopicContext>,
    /// How old the partition data is ([`Self::aged`]); `None` unknown.
    partition_data_age_ms: Option<u64>,
}

impl ContextParts {
    /// Labels of the members that have any; for each existing partition (`topics`:
    /// partition counts) of a topic some member subscribes to, the entry of `stats`
    /// with the committed offset in `committed` (which yields partitions in (topic,
    /// partition) order) laid over it; a partition with neither is left out. Cost:
    /// one copy of each reported partition of the subscribed topics (96 bytes each).
    pub(crate) fn build<'c>(
        members: &[MemberView<'_>],
        topics: &BTreeMap<TopicName, u32>,
        stats: &PartitionStats,
        committed: impl IntoIterator<Item = (&'c TopicPartition, i64)>,
    ) -> Self {
        let subscribed = subscribed_topics(members);
        let labelled = members
            .iter()
            .filter(|m| !m.labels.is_empty())
            .map(|m| MemberContext {
                member_id: RString::from(m.id.as_str()),
                labels: m
                    .labels
                    .iter()
                    .map(|l| MemberLabel {
                        key: RString::from(l.key.as_str()),
                        value: RString::from(l.value.as_str()),
                    })
                    .collect::<Vec<_>>()
                    .into(),
            })
            .collect();
        // Committed offsets of existing partitions of subscribed topics, by topic; they
        // come in topic order, so each topic is looked up once.
        let mut offsets: BTreeMap<&TopicName, Vec<(i32, i64)>> = BTreeMap::new();
        type Run<'t, 'c> = (&'c TopicName, Option<(&'t TopicName, u32)>, Vec<(i32, i64)>);
        let mut run: Option<Run<'_, 'c>> = None;
        for (tp, offset) in committed {
            if run.as_ref().is_none_or(|(t, _, _)| **t != tp.topic) {
                if let Some((_, Some((topic, _)), list)) = run.take() {
                    offsets.entry(topic).or_default().extend(list);
                }
                let known = subscribed
                    .get(&tp.topic)
                    .and_then(|t| topics.get(*t).map(|&n| (*t, n)));
                run = Some((&tp.topic, known, Vec::new()));
            }
            if let Some((_, Some((_, n)), list)) = &mut run {
                if tp.partition >= 0 && i64::from(tp.partition) < i64::from(*n) {
                    list.push((tp.partition, offset));
                }
            }
        }
        if let Some((_, Some((topic, _)), list)) = run {
            offsets.entry(topic).or_default().extend(list);
        }
        let mut out: Vec<TopicContext> = Vec::new();
        let mut leaders: BTreeSet<i32> = BTreeSet::new();
        for topic in subscribed {
            let Some(&count) = topics.get(topic) else {
                continue;
            };
            let known = stats.partitions(topic);
            let known =
                &known[..known.partition_point(|p| i64::from(p.partition) < i64::from(count))];
            let known = &known[known.partition_point(|p| p.partition < 0)..];
            let committed = offsets.get(topic).map_or(&[][..], Vec::as_slice);
            let partitions = merge(known, committed);
            if partitions.is_empty() {
                continue;
            }
            leaders.extend(partitions.iter().filter_map(|p| p.leader.into_option()));
            out.push(TopicContext {
                topic: RString::from(topic.as_str()),
                partitions: partitions.into(),
            });
        }
        ContextParts {
            members: labelled,
            brokers: leaders.into_iter().map(|id| stats.broker(id)).collect(),
            topics: out,
            partition_data_age_ms: None,
        }
    }

    /// The produce rates and lag of every partition the context carries any of, by
    /// topic (in the context's order: topics and partitions ascending), for operators
    /// ([`crate::seen_loads`]).
    pub(crate) fn seen_loads(&self) -> Vec<TopicSeenLoads> {
        self.topics
            .iter()
            .filter_map(|t| {
                let partitions: Vec<SeenLoad> = t
                    .partitions
                    .iter()
                    .map(|p| SeenLoad {
                        partition: p.partition,
                        bytes_per_sec: p.produce_bytes_per_sec.into_option(),
                        records_per_sec: p.produce_records_per_sec.into_option(),
                        // A committed offset past the (older) log end: unknown, not 0.
                        lag: match (p.log_end_offset, p.committed_offset) {
                            (RSome(end), RSome(at)) if at >= 0 && end >= at => Some(end - at),
                            _ => None,
                        },
                    })
                    .filter(|l| {
                        l.bytes_per_sec.is_some() || l.records_per_sec.is_some() || l.lag.is_some()
                    })
                    .collect();
                (!partitions.is_empty()).then(|| TopicSeenLoads {
                    topic: TopicName::new(t.topic.as_str()),
                    partitions,
                })
            })
            .collect()
    }

    /// The context saying how old `stats`' data is at `now_ms` (assignor ABI 3.2's
    /// `partition_data_age_ms`): the committed offsets it carries are current, the log
    /// offsets and rates as old as the table.
    pub(crate) fn aged(mut self, stats: &PartitionStats, now_ms: u64) -> Self {
        self.partition_data_age_ms = stats.age_ms(now_ms);
        self
    }

    /// Lends the context to `f` for the duration of an assignor call.
    pub(crate) fn lend<R>(&self, f: impl FnOnce(AssignContextRef<'_>) -> R) -> R {
        AssignContext {
            members: RSlice::from_slice(&self.members),
            brokers: RSlice::from_slice(&self.brokers),
            topics: RSlice::from_slice(&self.topics),
            partition_data_age_ms: self.partition_data_age_ms.into(),
        }
        .lend(f)
    }
}

/// Every topic some member subscribes to; a set shared by several members (by pointer)
/// is read once.
fn subscribed_topics<'a>(members: &[MemberView<'a>]) -> BTreeSet<&'a TopicName> {
    let mut sets: HashSet<*const BTreeSet<TopicName>> = HashSet::new();
    let mut subscribed = BTreeSet::new();
    for m in members {
        if sets.insert(std::ptr::from_ref(m.topics)) {
            subscribed.extend(m.topics.iter());
        }
    }
    subscribed
}

/// The union of `known` (host data, ascending by partition) and `committed` ((partition,
/// offset), ascending), one entry per partition, ascending.
fn merge(known: &[PartitionContext], committed: &[(i32, i64)]) -> Vec<PartitionContext> {
    let mut out = Vec::with_capacity(known.len().max(committed.len()));
    let (mut k, mut c) = (known.iter().peekable(), committed.iter().peekable());
    loop {
        match (k.peek(), c.peek()) {
            (None, None) => return out,
            (Some(p), Some(&&(partition, offset))) if p.partition == partition => {
                let mut p = (*p).clone();
                p.committed_offset = RSome(offset);
                out.push(p);
                k.next();
                c.next();
            }
            (Some(p), Some(&&(partition, _))) if p.partition < partition => {
                out.push((*p).clone());
                k.next();
            }
            (Some(p), None) => {
                out.push((*p).clone());
                k.next();
            }
            (_, Some(&&(partition, offset))) => {
                let mut p = PartitionContext::unknown(partition);
                p.committed_offset = RSome(offset);
                out.push(p);
                c.next();
            }
        }
    }
}

/// Checks an assignor's output against its input and converts it: every partition of a
/// subscribed topic assigned to exactly one member subscribed to its topic, nothing
/// else, no unknown member, no member twice. Members missing from the output get
/// nothing.
pub(crate) fn validate_assignment(
    members: &[MemberView<'_>],
    topics: &BTreeMap<TopicName, u32>,
    output: &Assignment,
) -> Result<BTreeMap<ConsumerId, BTreeSet<TopicPartition>>, String> {
    let by_id: BTreeMap<&str, &MemberView<'_>> =
        members.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut result: BTreeMap<ConsumerId, BTreeSet<TopicPartition>> = BTreeMap::new();
    let mut assigned: BTreeSet<TopicPartition> = BTreeSet::new();
    for entry in output.members.iter() {
        let Some(member) = by_id.get(entry.member_id.as_str()) else {
            return Err(format!(
                "unknown member `{}` in the output",
                entry.member_id
            ));
        };
        if result.contains_key(member.id) {
            return Err(format!("member `{}` appears twice", entry.member_id));
        }
        let mut mine = BTreeSet::new();
        for tps in entry.partitions.iter() {
            let Some((topic, &count)) = topics.get_key_value(tps.topic.as_str()) else {
                return Err(format!("unknown topic `{}`", tps.topic));
            };
            if !member.topics.contains(topic) {
                return Err(format!(
                    "member `{}` got topic `{}` it does not subscribe to",
                    entry.member_id, tps.topic
                ));
            }
            for &p in tps.partitions.iter() {
                if p < 0 || i64::from(p) >= i64::from(count) {
                    return Err(format!("partition {}-{p} does not exist", tps.topic));
                }
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: p,
                };
                if !assigned.insert(tp.clone()) {
                    return Err(format!("partition {tp} assigned twice"));
                }
                mine.insert(tp);
            }
        }
        result.insert(member.id.clone(), mine);
    }
    // Full coverage, checked once per subscribed topic (not once per member: that is
    // members × partitions lookups, hundreds of ms at 1,000 × 10,000).
    let mut subscribed: BTreeSet<&TopicName> = BTreeSet::new();
    for m in members {
        result.entry(m.id.clone()).or_default();
        subscribed.extend(m.topics.iter());
    }
    for topic in subscribed {
        if let Some(&count) = topics.get(topic) {
            let count = count.min(i32::MAX as u32) as usize;
            let covered = assigned
                .range(
                    TopicPartition {
                        topic: topic.clone(),
                        partition: 0,
                    }..,
                )
                .take_while(|tp| &tp.topic == topic)
                .count();
            if covered < count {
                let missing = (0..count as i32)
                    .find(|&p| {
                        !assigned.contains(&TopicPartition {
                            topic: topic.clone(),
                            partition: p,
                        })
                    })
                    .unwrap_or(0);
                return Err(format!("partition {topic}-{missing} assigned to no one"));
            }
        }
    }
    Ok(result)
}

/// Whether two inputs describe the same group: the same members with the same
/// subscriptions, racks and weights, over the same partition counts (what members own
/// aside). Tells whether a call's result, back from the host, is still about the
/// members as they are ([`crate::core::assigning`]).
pub(crate) fn same_members(a: &AssignInput, b: &AssignInput) -> bool {
    a.topics == b.topics
        && a.members.len() == b.members.len()
        && a.members.iter().zip(b.members.iter()).all(|(x, y)| {
            x.member_id == y.member_id
                && x.topics == y.topics
                && x.rack == y.rack
                && x.weight == y.weight
        })
}

/// [`validate_assignment`] against what the assignor was given: the members of
/// `input` with their subscribed (existing) topics, and its partition counts. The
/// check of a result that may come back after the group's members moved on
/// ([`crate::assignor_job`]).
pub(crate) fn validate_against_input(
    input: &AssignInput,
    output: &Assignment,
) -> Result<BTreeMap<ConsumerId, BTreeSet<TopicPartition>>, String> {
    // Members with the same topic list (every member of a homogeneous group) share one
    // set, built once.
    let mut sets: Vec<BTreeSet<TopicName>> = Vec::new();
    let mut by_list: HashMap<&[RString], usize> = HashMap::new();
    let members: Vec<(ConsumerId, usize)> = input
        .members
        .iter()
        .map(|m| {
            let set = *by_list.entry(m.topics.as_slice()).or_insert_with(|| {
                sets.push(
                    m.topics
                        .iter()
                        .map(|t| TopicName::new(t.as_str()))
                        .collect(),
                );
                sets.len() - 1
            });
            (ConsumerId::new(m.member_id.as_str()), set)
        })
        .collect();
    let topics: BTreeMap<TopicName, u32> = input
        .topics
        .iter()
        .map(|t| (TopicName::new(t.name.as_str()), t.partitions))
        .collect();
    let none = BTreeSet::new();
    let views: Vec<MemberView<'_>> = members
        .iter()
        .map(|(id, set)| MemberView {
            id,
            topics: &sets[*set],
            owned: &none,
            rack: None,
            weight: 1,
            labels: &[],
        })
        .collect();
    validate_assignment(&views, &topics, output)
}

/// Checks a share assignor's output against its input (the share-assignor contract,
/// `drover_abi::assignor`, assignor ABI 3.3) and converts it: every partition of a
/// subscribed topic assigned to at least one member subscribed to its topic (possibly
/// several), nothing else, no unknown member, no member twice, no partition twice in
/// one member. Members missing from the output get nothing.
pub(crate) fn validate_share_against_input(
    input: &AssignInput,
    output: &Assignment,
) -> Result<BTreeMap<ConsumerId, BTreeSet<TopicPartition>>, String> {
    let subscribed: BTreeMap<&str, BTreeSet<&str>> = input
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.topics.iter().map(RString::as_str).collect(),
            )
        })
        .collect();
    let counts: BTreeMap<&str, u32> = input
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    let mut result: BTreeMap<ConsumerId, BTreeSet<TopicPartition>> = BTreeMap::new();
    let mut covered: BTreeSet<(&str, i32)> = BTreeSet::new();
    for entry in output.members.iter() {
        let id = entry.member_id.as_str();
        let Some(topics) = subscribed.get(id) else {
            return Err(format!("unknown member `{id}` in the output"));
        };
        let mut mine = BTreeSet::new();
        for tps in entry.partitions.iter() {
            let topic = tps.topic.as_str();
            let Some(&count) = counts.get(topic) else {
                return Err(format!("unknown topic `{topic}`"));
            };
            if !topics.contains(topic) {
                return Err(format!(
                    "member `{id}` got topic `{topic}` it does not subscribe to"
                ));
            }
            for &p in tps.partitions.iter() {
                if p < 0 || i64::from(p) >= i64::from(count) {
                    return Err(format!("partition {topic}-{p} does not exist"));
                }
                if !mine.insert(TopicPartition::new(topic, p)) {
                    return Err(format!("partition {topic}-{p} listed twice for `{id}`"));
                }
                covered.insert((topic, p));
            }
        }
        if result.insert(ConsumerId::new(id), mine).is_some() {
            return Err(format!("member `{id}` appears twice"));
        }
    }
    for id in subscribed.keys() {
        result.entry(ConsumerId::new(id)).or_default();
    }
    let wanted: BTreeSet<&str> = subscribed.values().flatten().copied().collect();
    for topic in wanted {
        let count = counts.get(topic).copied().unwrap_or(0).min(i32::MAX as u32) as i32;
        if let Some(p) = (0..count).find(|&p| !covered.contains(&(topic, p))) {
            return Err(format!("partition {topic}-{p} assigned to no one"));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_abi::assignor::MemberAssignment;

    fn topics() -> BTreeMap<TopicName, u32> {
        [(TopicName::new("a"), 2), (TopicName::new("b"), 1)]
            .into_iter()
            .collect()
    }

    #[test]
    fn input_lists_existing_topics_and_owned_partitions() {
        let id = ConsumerId::new("c1");
        let subscribed: BTreeSet<TopicName> = ["a", "missing"].map(TopicName::new).into();
        let owned: BTreeSet<TopicPartition> = [TopicPartition::new("a", 1)].into();
        let members = [MemberView {
            id: &id,
            topics: &subscribed,
            owned: &owned,
            rack: Some("r1"),
            weight: 3,
            labels: &[],
        }];
        let input = build_input("g", &members, &topics());
        assert_eq!(input.members.len(), 1);
        assert_eq!(input.members[0].topics.len(), 1);
        assert_eq!(input.members[0].owned[0].partitions.as_slice(), &[1]);
        assert_eq!(input.topics.as_slice(), &[TopicInfo::new("a", 2)]);
        assert_eq!(
            input.members[0]
                .rack
                .as_ref()
                .map(RString::as_str)
                .into_option(),
            Some("r1")
        );
        assert_eq!(input.members[0].weight, 3);
    }

    #[test]
    fn context_has_labels_and_committed_offsets_of_subscribed_partitions() {
        let (c1, c2) = (ConsumerId::new("c1"), ConsumerId::new("c2"));
        let sub_a: BTreeSet<TopicName> = ["a"].map(TopicName::new).into();
        let none = BTreeSet::new();
        let labels = [drover_protocol::Label {
            key: "tier".into(),
            value: "gold".into(),
        }];
        let view = |id, labels| MemberView {
            id,
            topics: &sub_a,
            owned: &none,
            rack: None,
            weight: 1,
            labels,
        };
        let members = [view(&c1, &labels[..]), view(&c2, &[])];
        // a-0 and a-1 exist; a-5 is out of range; b-0 exists but nobody subscribes.
        let committed = [
            (TopicPartition::new("a", 0), 7),
            (TopicPartition::new("a", 1), 9),
            (TopicPartition::new("a", 5), 1),
            (TopicPartition::new("b", 0), 3),
        ];
        let parts = ContextParts::build(
            &members,
            &topics(),
            &PartitionStats::default(),
            committed.iter().map(|(tp, o)| (tp, *o)),
        );
        let (labels, offsets) = parts.lend(|ctx| {
            let ctx = drover_abi::sdk::assignor::Context::new(ctx);
            let labels = (
                ctx.label("c1", "tier").map(str::to_owned),
                ctx.labels("c2").len(),
            );
            let offsets: Vec<Option<i64>> = [("a", 0), ("a", 1), ("a", 5), ("b", 0)]
                .iter()
                .map(|&(t, p)| {
                    ctx.partition(t, p)
                        .and_then(|c| c.committed_offset.into_option())
                })
                .collect();
            (labels, offsets)
        });
        assert_eq!(labels, (Some("gold".to_owned()), 0));
        assert_eq!(offsets, vec![Some(7), Some(9), None, None]);
    }

    #[test]
    fn a_share_output_may_share_partitions_but_must_cover_them() {
        let member = |id: &str, topics: &[&str]| AssignorMember {
            member_id: id.into(),
            topics: topics.iter().map(|t| RString::from(*t)).collect(),
            owned: RVec::new(),
            rack: None.into(),
            weight: 1,
        };
        let input = AssignInput {
            group: "g".into(),
            members: vec![member("c1", &["a"]), member("c2", &["a", "b"])].into(),
            topics: vec![TopicInfo::new("a", 2), TopicInfo::new("b", 1)].into(),
        };
        type Spec<'a> = &'a [(&'a str, &'a [(&'a str, &'a [i32])])];
        let out = |entries: Spec<'_>| Assignment {
            members: entries
                .iter()
                .map(|(m, tps)| MemberAssignment {
                    member_id: (*m).into(),
                    partitions: tps
                        .iter()
                        .map(|(t, ps)| TopicPartitions::new(*t, ps.to_vec()))
                        .collect::<Vec<_>>()
                        .into(),
                })
                .collect::<Vec<_>>()
                .into(),
        };
        // a-0 and a-1 held by both members: fine.
        let shared = out(&[
            ("c1", &[("a", &[0, 1])]),
            ("c2", &[("a", &[0, 1]), ("b", &[0])]),
        ]);
        let r = validate_share_against_input(&input, &shared).unwrap();
        assert_eq!(r[&ConsumerId::new("c1")].len(), 2);
        // b-0 to c1, which does not subscribe to b.
        let bad = out(&[("c1", &[("a", &[0, 1]), ("b", &[0])])]);
        assert!(validate_share_against_input(&input, &bad).is_err());
        // b-0 held by no one.
        let gap = out(&[("c1", &[("a", &[0, 1])]), ("c2", &[("a", &[1])])]);
        let e = validate_share_against_input(&input, &gap).unwrap_err();
        assert_eq!(e, "partition b-0 assigned to no one");
        // A partition twice in one member, out of range, an unknown member.
        let twice = out(&[("c2", &[("a", &[0, 1]), ("a", &[1]), ("b", &[0])])]);
        assert!(validate_share_against_input(&input, &twice).is_err());
        let range = out(&[("c2", &[("a", &[0, 1, 2]), ("b", &[0])])]);
        assert!(validate_share_against_input(&input, &range).is_err());
        let stranger = out(&[("c2", &[("a", &[0, 1]), ("b", &[0])]), ("c9", &[])]);
        assert!(validate_share_against_input(&input, &stranger).is_err());
    }

    #[test]
    fn output_is_checked() {
        let c1 = ConsumerId::new("c1");
        let c2 = ConsumerId::new("c2");
        let sub_ab: BTreeSet<TopicName> = ["a", "b"].map(TopicName::new).into();
        let sub_a: BTreeSet<TopicName> = ["a"].map(TopicName::new).into();
        let none = BTreeSet::new();
        let members = [
            MemberView {
                id: &c1,
                topics: &sub_ab,
                owned: &none,
                rack: None,
                weight: 1,
                labels: &[],
            },
            MemberView {
                id: &c2,
                topics: &sub_a,
                owned: &none,
                rack: None,
                weight: 1,
                labels: &[],
            },
        ];
        type Spec<'a> = Vec<(&'a str, Vec<(&'a str, Vec<i32>)>)>;
        let assign = |entries: Spec<'_>| Assignment {
            members: entries
                .into_iter()
                .map(|(m, tps)| MemberAssignment {
                    member_id: m.into(),
                    partitions: tps
                        .into_iter()
                        .map(|(t, ps)| TopicPartitions::new(t, ps))
                        .collect::<Vec<_>>()
                        .into(),
                })
                .collect::<Vec<_>>()
                .into(),
        };
        let ok = assign(vec![
            ("c1", vec![("a", vec![0]), ("b", vec![0])]),
            ("c2", vec![("a", vec![1])]),
        ]);
        let r = validate_assignment(&members, &topics(), &ok).unwrap();
        assert_eq!(r[&c2], [TopicPartition::new("a", 1)].into());
        // b-0 to a member not subscribed to b.
        let bad = assign(vec![
            ("c1", vec![("a", vec![0, 1])]),
            ("c2", vec![("b", vec![0])]),
        ]);
        assert!(validate_assignment(&members, &topics(), &bad).is_err());
        // a-1 twice.
        let twice = assign(vec![
            ("c1", vec![("a", vec![0, 1]), ("b", vec![0])]),
            ("c2", vec![("a", vec![1])]),
        ]);
        assert!(validate_assignment(&members, &topics(), &twice).is_err());
        // b-0 missing.
        let missing = assign(vec![("c1", vec![("a", vec![0, 1])])]);
        let e = validate_assignment(&members, &topics(), &missing).unwrap_err();
        assert_eq!(e, "partition b-0 assigned to no one");
        // a-1 missing, with a-0 and b-0 assigned.
        let gap = assign(vec![("c1", vec![("a", vec![0]), ("b", vec![0])])]);
        let e = validate_assignment(&members, &topics(), &gap).unwrap_err();
        assert_eq!(e, "partition a-1 assigned to no one");
        // out of range.
        let range = assign(vec![("c1", vec![("a", vec![0, 1, 2]), ("b", vec![0])])]);
        assert!(validate_assignment(&members, &topics(), &range).is_err());
    }
}
