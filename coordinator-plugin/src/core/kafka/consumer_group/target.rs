//! The target assignment of a group: which assignor runs, running it over the members
//! and checking its output, installing the result at the group epoch (with the
//! partition loads the assignor saw, for operators: [`crate::seen_loads`]), and keeping
//! the previous target (and retrying) when the assignor fails (Kafka's
//! `TargetAssignmentBuilder`).

use std::collections::{BTreeMap, BTreeSet};

use super::group::ConsumerGroup;
use super::{Assigned, AssignorRun, Env};
use crate::assignors::{build_input, validate_assignment, ContextParts, MemberView};
use crate::seen_loads::TopicSeenLoads;
use crate::types::ConsumerId;

/// Resolves a server assignor name: a loaded assignor of that name, else the Kafka
/// client names `uniform` → `sticky` and `range` → `range` when those are loaded.
pub(super) fn resolve_assignor(env: &Env<'_>, name: &str) -> Option<String> {
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

/// The assignment interval per member of a group, µs ([`ConsumerGroup::target_due`]).
pub(super) const ASSIGNMENT_INTERVAL_US_PER_MEMBER: u64 = 100;

impl ConsumerGroup {
    /// The assignor the group uses: the one most members name, else the default.
    pub(super) fn preferred_assignor(&self, env: &Env<'_>) -> String {
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
    /// checked target, or the assignor's name and what went wrong. An assignor that is
    /// not loaded, or that fails (panicked and out of service, or breaking the
    /// contract), gives way to the default assignor for this run, counted in
    /// `env.fallbacks` (the `assignor_fallbacks` metric), so a missing or broken plugin
    /// never stalls the group; every failed run is counted in `env.failures`
    /// (`assignor_failures`).
    pub(super) fn run_assignor(&self, env: &Env<'_>) -> AssignorRun {
        let requested = self.preferred_assignor(env);
        let default = resolve_assignor(env, env.default_assignor)
            .unwrap_or_else(|| env.default_assignor.to_owned());
        let assignor = if env.assignors.contains(&requested) {
            requested
        } else {
            tracing::warn!(
                group = %self.id,
                requested,
                default,
                "assignor `{requested}` is not loaded; the group uses the default assignor `{default}`"
            );
            env.fallbacks.set(env.fallbacks.get() + 1);
            default.clone()
        };
        if self.members.is_empty() {
            return Ok(Assigned {
                assignor,
                target: BTreeMap::new(),
                loads: Vec::new(),
            });
        }
        let attempt = |name: &str| {
            let result = self.attempt(env, name);
            if result.is_err() {
                env.failures.set(env.failures.get() + 1);
            }
            result
        };
        match attempt(&assignor) {
            Err(error) if assignor != default => {
                tracing::warn!(
                    group = %self.id,
                    assignor,
                    default,
                    %error,
                    "assignor `{assignor}` failed; this run uses the default assignor `{default}`"
                );
                env.fallbacks.set(env.fallbacks.get() + 1);
                attempt(&default)
                    .map(|(target, loads)| Assigned {
                        assignor: default.clone(),
                        target,
                        loads,
                    })
                    .map_err(|error| (default, error))
            }
            other => other
                .map(|(target, loads)| Assigned {
                    assignor: assignor.clone(),
                    target,
                    loads,
                })
                .map_err(|error| (assignor, error)),
        }
    }

    /// Runs assignor `name` over the members and checks its output: the target, and
    /// the partition loads the assignor's context carried.
    fn attempt(
        &self,
        env: &Env<'_>,
        name: &str,
    ) -> Result<(super::Target, Vec<TopicSeenLoads>), String> {
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
                // KIP-848's `RackId`; the protocol has no weight (docs/plugins.md).
                rack: m.rack_id.as_deref(),
                weight: 1,
                labels: &[],
            })
            .collect();
        let input = build_input(self.id.as_str(), &views, env.topics);
        // KIP-848 members carry no labels; the group's committed offsets are those the
        // coordinator saw written (`committed`), laid over the host's partition data.
        let context = ContextParts::build(
            &views,
            env.topics,
            env.partition_stats,
            self.committed.iter().map(|(tp, offset)| (tp, *offset)),
        )
        .aged(env.partition_stats, env.now);
        let output = context
            .lend(|context| env.assignors.assign_with_context(name, &input, context))
            .map_err(|e| e.to_string())?;
        let checked = validate_assignment(&views, env.topics, &output)
            .map_err(|e| format!("invalid assignment: {e}"))?;
        let target = checked
            .into_iter()
            .map(|(id, set)| (id.as_str().to_owned(), set))
            .collect();
        Ok((target, context.seen_loads()))
    }

    /// Installs a new target at the group epoch with the loads its assignor saw, or
    /// after an assignor failure the old one (without removed members and vanished
    /// partitions, with the loads it was computed with) and a retry time.
    pub(super) fn install(&mut self, env: &Env<'_>, result: AssignorRun) {
        self.assignment_epoch = self.epoch;
        self.assigned_at = Some(env.now);
        self.due_at = None;
        match result {
            Ok(Assigned {
                assignor,
                target,
                loads,
            }) => {
                if target != self.target {
                    self.settling_until =
                        env.now.saturating_add(u64::from(env.rebalance_settle_ms));
                }
                self.target = target;
                self.assignor = assignor;
                self.last_loads = loads;
                self.retry_at = None;
                tracing::debug!(group = %self.id, epoch = self.epoch, assignor = %self.assignor, "new target assignment");
            }
            Err((assignor, message)) => {
                tracing::warn!(group = %self.id, epoch = self.epoch, %assignor, error = %message, "target assignment failed; the previous one stays until a retry succeeds");
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

    /// When the target of the group epoch may be computed, if it is behind the group
    /// epoch: the assignor's last run plus the group's assignment interval,
    /// [`ASSIGNMENT_INTERVAL_US_PER_MEMBER`] per member (as many as at the first bump
    /// that waits, [`ConsumerGroup::due_at`]) and at most
    /// `consumer_assignment_interval_ms` (at once for a group never assigned). Joins
    /// arriving faster than that share one assignor run, so forming a group of `n`
    /// costs runs in proportion to the time it takes, not `n` runs over up to `n`
    /// members each (after KIP-1263's assignment interval, scaled to the group: a
    /// group of ten is assigned at once, one of 10,000 at most once a second).
    pub(super) fn target_due(&self, env: &Env<'_>) -> Option<u64> {
        if self.epoch <= self.assignment_epoch {
            return None;
        }
        if let Some(due) = self.due_at {
            return Some(due);
        }
        let Some(at) = self.assigned_at else {
            return Some(env.now);
        };
        let interval =
            (self.members.len() as u64).saturating_mul(ASSIGNMENT_INTERVAL_US_PER_MEMBER) / 1_000;
        Some(at.saturating_add(interval.min(u64::from(env.assignment_interval_ms))))
    }

    /// Computes the target assignment of the group epoch once it is due
    /// ([`ConsumerGroup::target_due`]); until then members reconcile towards the
    /// target in force, and the heartbeats answered meanwhile are told to come back
    /// when it is due.
    pub(super) fn compute_target_when_due(&mut self, env: &Env<'_>) {
        match self.target_due(env) {
            Some(due) if due <= env.now => self.compute_target(env),
            // Fixed now: a group growing by joins would otherwise push its own due
            // time back as fast as time passes.
            Some(due) => self.due_at = Some(due),
            None => {}
        }
    }

    /// Computes the target assignment of the group epoch.
    pub(super) fn compute_target(&mut self, env: &Env<'_>) {
        let result = self.run_assignor(env);
        self.install(env, result);
    }

    /// After an assignor failure, once the retry time has come: runs it again, and
    /// bumps the group epoch for its target if it succeeds.
    pub(super) fn maybe_retry(&mut self, env: &Env<'_>) {
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
}
