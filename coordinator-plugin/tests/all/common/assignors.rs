//! In-process assignors for the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use drover_abi::assignor::{AssignInput, Assignment, MemberAssignment};
use drover_abi::{PluginError, TopicPartitions};
use drover_coordinator::Assignors;

/// A sticky, balanced policy: members keep what they own up to their fair share, the
/// rest goes to the least-loaded subscribed member (ties by id).
pub fn sticky(input: &AssignInput) -> Assignment {
    let members: Vec<&str> = {
        let mut m: Vec<&str> = input.members.iter().map(|m| m.member_id.as_str()).collect();
        m.sort();
        m
    };
    let subs: BTreeMap<&str, BTreeSet<&str>> = input
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.topics.iter().map(|t| t.as_str()).collect(),
            )
        })
        .collect();
    let owned: BTreeMap<(&str, i32), &str> = input
        .members
        .iter()
        .flat_map(|m| {
            m.owned.iter().flat_map(move |tp| {
                tp.partitions
                    .iter()
                    .map(move |p| ((tp.topic.as_str(), *p), m.member_id.as_str()))
            })
        })
        .collect();
    let mut all: Vec<(&str, i32)> = Vec::new();
    let mut topics: Vec<_> = input.topics.iter().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for t in topics {
        if members.iter().any(|m| subs[m].contains(t.name.as_str())) {
            for p in 0..t.partitions as i32 {
                all.push((t.name.as_str(), p));
            }
        }
    }
    // Fair shares: `base` each, one more for `extra` of them.
    let n = members.len().max(1);
    let base = all.len() / n;
    let mut extra = all.len() % n;
    let mut result: BTreeMap<&str, Vec<(&str, i32)>> =
        members.iter().map(|m| (*m, Vec::new())).collect();
    let mut rest = Vec::new();
    let mut over = Vec::new();
    for tp in &all {
        match owned.get(tp) {
            Some(m) if subs.get(m).is_some_and(|s| s.contains(tp.0)) => {
                if result[m].len() < base {
                    result.get_mut(m).unwrap().push(*tp);
                } else {
                    over.push((*m, *tp));
                }
            }
            _ => rest.push(*tp),
        }
    }
    for (m, tp) in over {
        if result[m].len() == base && extra > 0 {
            extra -= 1;
            result.get_mut(m).unwrap().push(tp);
        } else {
            rest.push(tp);
        }
    }
    for tp in rest {
        let best = members
            .iter()
            .filter(|m| subs[*m].contains(tp.0))
            .min_by_key(|m| (result[*m].len(), **m))
            .copied();
        if let Some(m) = best {
            result.get_mut(m).unwrap().push(tp);
        }
    }
    to_assignment(result)
}

/// A range policy: per topic, contiguous ranges over the sorted subscribers. Not
/// sticky.
pub fn range(input: &AssignInput) -> Assignment {
    let mut result: BTreeMap<&str, Vec<(&str, i32)>> = input
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), Vec::new()))
        .collect();
    for t in input.topics.iter() {
        let mut subs: Vec<&str> = input
            .members
            .iter()
            .filter(|m| m.topics.iter().any(|x| x.as_str() == t.name.as_str()))
            .map(|m| m.member_id.as_str())
            .collect();
        subs.sort();
        if subs.is_empty() {
            continue;
        }
        let n = t.partitions as usize;
        let k = subs.len();
        for (i, m) in subs.iter().enumerate() {
            let start = i * n / k;
            let end = (i + 1) * n / k;
            for p in start..end {
                result.get_mut(m).unwrap().push((t.name.as_str(), p as i32));
            }
        }
    }
    to_assignment(result)
}

/// A load policy from the context (the `by-rate` test assignor): partitions by produce
/// rate, highest first (ties by topic and partition; unknown rates count 0), each to
/// the subscribed member with the least summed rate so far (ties by partition count,
/// then id). Not sticky: its output follows the rates alone.
pub fn by_rate(
    input: &AssignInput,
    context: &drover_abi::assignor::AssignContextRef<'_>,
) -> Assignment {
    let rate = |topic: &str, p: i32| {
        context
            .topics()
            .iter()
            .find(|t| t.topic.as_str() == topic)
            .and_then(|t| t.partitions.iter().find(|c| c.partition == p))
            .and_then(|c| c.produce_bytes_per_sec.into_option())
            .unwrap_or(0.0)
    };
    let mut all: Vec<(f64, &str, i32)> = Vec::new();
    for t in input.topics.iter() {
        for p in 0..t.partitions as i32 {
            all.push((rate(t.name.as_str(), p), t.name.as_str(), p));
        }
    }
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut load: BTreeMap<&str, f64> = BTreeMap::new();
    let mut result: BTreeMap<&str, Vec<(&str, i32)>> = input
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), Vec::new()))
        .collect();
    for (r, t, p) in all {
        let best = input
            .members
            .iter()
            .filter(|m| m.topics.iter().any(|x| x.as_str() == t))
            .map(|m| m.member_id.as_str())
            .min_by(|a, b| {
                let (la, lb) = (
                    load.get(a).copied().unwrap_or(0.0),
                    load.get(b).copied().unwrap_or(0.0),
                );
                la.total_cmp(&lb)
                    .then(result[a].len().cmp(&result[b].len()))
                    .then(a.cmp(b))
            });
        if let Some(m) = best {
            *load.entry(m).or_default() += r;
            result.get_mut(m).unwrap().push((t, p));
        }
    }
    to_assignment(result)
}

fn to_assignment(result: BTreeMap<&str, Vec<(&str, i32)>>) -> Assignment {
    let members = result
        .into_iter()
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
                member_id: m.into(),
                partitions: grouped.into(),
            }
        })
        .collect::<Vec<_>>();
    Assignment {
        members: members.into(),
    }
}

/// The assignors the tests load: `sticky`, `range`, `broken` (fails while its switch
/// is on, then behaves as sticky) and `by-rate` (balances the context's produce rates;
/// as range without a context). Counts calls.
#[derive(Clone, Default)]
pub struct TestAssignors {
    pub calls: Arc<AtomicUsize>,
    pub broken: Arc<AtomicBool>,
    /// One more name, standing for another assignor (as if a rescan loaded it).
    pub alias: Option<(String, &'static str)>,
    /// The context of every run, in order (brokers and per-partition data).
    pub contexts: Arc<std::sync::Mutex<Vec<SeenContext>>>,
    /// Whether the coordinator hands their calls to the host, as it does the loaded
    /// plugins' (`Assignors::runner`; the harness runs them as the host would),
    /// instead of calling them inside `handle`.
    pub threaded: bool,
}

/// What one assignor run saw in its context, copied out of the call.
#[derive(Debug, Clone)]
pub struct SeenContext {
    pub brokers: Vec<drover_abi::assignor::BrokerContext>,
    pub topics: Vec<drover_abi::assignor::TopicContext>,
}

impl SeenContext {
    /// The entry of `topic`-`partition`, if the context has one.
    pub fn partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<&drover_abi::assignor::PartitionContext> {
        self.topics
            .iter()
            .find(|t| t.topic.as_str() == topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition)
    }
}

impl TestAssignors {
    /// These assignors, run as the host runs plugins: off the coordinator's thread.
    pub fn threaded(mut self) -> Self {
        self.threaded = true;
        self
    }

    /// These assignors plus `name`, which behaves as `target`.
    pub fn with_alias(mut self, name: &str, target: &'static str) -> Self {
        self.alias = Some((name.to_owned(), target));
        self
    }
}

impl Assignors for TestAssignors {
    fn contains(&self, name: &str) -> bool {
        matches!(name, "sticky" | "range" | "broken" | "by-rate")
            || self.alias.as_ref().is_some_and(|(a, _)| a == name)
    }

    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let name = match &self.alias {
            Some((alias, target)) if alias == name => target,
            _ => name,
        };
        match name {
            "sticky" => Ok(sticky(input)),
            "range" | "by-rate" => Ok(range(input)),
            "broken" if self.broken.load(Ordering::SeqCst) => {
                Err(PluginError::internal("broken on purpose"))
            }
            "broken" => Ok(sticky(input)),
            other => Err(PluginError::invalid_input(format!("no assignor {other}"))),
        }
    }

    fn assign_with_context(
        &self,
        name: &str,
        input: &AssignInput,
        context: drover_abi::assignor::AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        let seen = SeenContext {
            brokers: context.brokers().to_vec(),
            topics: context.topics().to_vec(),
        };
        self.contexts.lock().unwrap().push(seen);
        if name == "by-rate" {
            self.calls.fetch_add(1, Ordering::SeqCst);
            return Ok(by_rate(input, &context));
        }
        self.assign(name, input)
    }

    fn runner(&self, name: &str) -> Option<drover_coordinator::AssignorRunner> {
        if !self.threaded || !self.contains(name) {
            return None;
        }
        let (me, name) = (self.clone(), name.to_owned());
        Some(Arc::new(move |input, context| {
            me.assign_with_context(&name, input, context)
        }))
    }

    /// `fan-out` (every subscriber gets every partition of its topics) and
    /// `share-broken` (fails while `broken` is on, else leaves the last partition of
    /// each topic to nobody) serve share groups; the others do not.
    fn share_groups_supported(&self, name: &str) -> bool {
        matches!(name, "fan-out" | "share-broken")
    }

    fn assign_share(
        &self,
        name: &str,
        input: &AssignInput,
        context: drover_abi::assignor::AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.contexts.lock().unwrap().push(SeenContext {
            brokers: context.brokers().to_vec(),
            topics: context.topics().to_vec(),
        });
        let give = |drop_last: bool| {
            let result = input
                .members
                .iter()
                .map(|m| {
                    let mut tps = Vec::new();
                    for t in input.topics.iter() {
                        if m.topics.iter().any(|x| x == &t.name) {
                            let n = t.partitions as i32 - i32::from(drop_last);
                            tps.extend((0..n).map(|p| (t.name.as_str(), p)));
                        }
                    }
                    (m.member_id.as_str(), tps)
                })
                .collect();
            to_assignment(result)
        };
        match name {
            "fan-out" => Ok(give(false)),
            "share-broken" if self.broken.load(Ordering::SeqCst) => {
                Err(PluginError::internal("broken on purpose"))
            }
            "share-broken" => Ok(give(true)),
            other => Err(PluginError::unsupported(format!(
                "{other} does not serve share groups"
            ))),
        }
    }

    fn share_runner(&self, name: &str) -> Option<drover_coordinator::AssignorRunner> {
        if !self.threaded || !self.share_groups_supported(name) {
            return None;
        }
        let (me, name) = (self.clone(), name.to_owned());
        Some(Arc::new(move |input, context| {
            me.assign_share(&name, input, context)
        }))
    }
}
