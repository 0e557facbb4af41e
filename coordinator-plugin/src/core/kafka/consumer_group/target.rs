//! The target assignment of a group: which assignor runs, running it over the members
//! and checking its output, installing the result at the group epoch (with the
//! partition loads the assignor saw, for operators: [`crate::seen_loads`]), and keeping
//! the previous target (and retrying) when the assignor fails (Kafka's
//! `TargetAssignmentBuilder`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_abi::assignor::{AssignInput, Assignment};
use drover_abi::PluginError;
use drover_protocol::RebalanceRecord;

use super::group::ConsumerGroup;
use super::{Assigned, AssignorRun, Env};
use crate::assignors::{
    build_input, same_members, validate_against_input, ContextParts, MemberView,
};
use crate::core::assigning::Call;
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

    /// Starts the group's assignor over the members for `purpose`: the assignor most
    /// members name, or the default when it is not loaded (counted in `env.fallbacks`,
    /// the `assignor_fallbacks` metric), so a missing plugin never stalls the group.
    /// The call runs inline or on a host thread ([`crate::core::assigning`]); either
    /// way [`Self::complete`] takes its result. Nothing starts while a call is in
    /// flight: its result comes first, and the group epoch tells whether another run
    /// is due after it.
    pub(super) fn start_assignment(&mut self, env: &Env<'_>, purpose: Purpose) {
        if self.assigning.is_some() {
            return;
        }
        let requested = self.preferred_assignor(env);
        let default = default_assignor(env);
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
            default
        };
        if self.members.is_empty() {
            let epoch = self.epoch;
            let empty = Assigned {
                assignor,
                target: BTreeMap::new(),
                loads: Vec::new(),
            };
            self.finish(env, purpose, (epoch, false), Ok(empty));
            return;
        }
        self.launch(env, purpose, assignor);
    }

    /// Calls assignor `name` over the members as they are now, with the context of
    /// their subscribed partitions (KIP-848 members carry no labels; the committed
    /// offsets are those the coordinator saw written, laid over the host's partition
    /// data).
    fn launch(&mut self, env: &Env<'_>, purpose: Purpose, name: String) {
        let (input, context) = self.with_views(|views| {
            let input = Arc::new(build_input(self.id.as_str(), views, env.topics));
            let context = ContextParts::build(
                views,
                env.topics,
                env.partition_stats,
                self.committed.iter().map(|(tp, offset)| (tp, *offset)),
            )
            .aged(env.partition_stats, env.now);
            (input, context)
        });
        let loads = context.seen_loads();
        let mut call = Assigning {
            call: 0,
            epoch: self.epoch,
            assignor: name,
            purpose,
            input: Arc::clone(&input),
            loads,
        };
        match env.assignors.call(&self.id, &call.assignor, input, context) {
            Call::Done(result) => self.complete(env, call, result),
            Call::Started(id) => {
                if purpose == Purpose::Due {
                    // Until the result is back, the target in force serves at this
                    // epoch (members move to it, keeping what they hold), as after
                    // a failed run; the result then comes as a retry's does: at a
                    // new group epoch, which members notice.
                    self.install_previous(env, call.epoch);
                    call.purpose = Purpose::Retry;
                }
                call.call = id;
                self.assigning = Some(call);
            }
        }
    }

    /// Runs `f` over the members as an assignor sees them: each owning its entry of the
    /// target in force.
    fn with_views<R>(&self, f: impl FnOnce(&[MemberView<'_>]) -> R) -> R {
        let ids: Vec<ConsumerId> = self.members.keys().map(ConsumerId::new).collect();
        let none = BTreeSet::new();
        let views: Vec<MemberView<'_>> = self
            .members
            .values()
            .zip(&ids)
            .map(|(m, id)| {
                let owned = self.target.get(&m.id).unwrap_or(&none);
                MemberView::kafka(id, &m.topics, owned, m.rack_id.as_deref())
            })
            .collect();
        f(&views)
    }

    /// The result of assignor call `call` arrived from the host: completed if the
    /// group still waits for it, else dropped. Returns whether it was taken.
    pub(super) fn assignor_done(
        &mut self,
        env: &Env<'_>,
        call: u64,
        result: Result<Assignment, PluginError>,
    ) -> bool {
        match self.assigning.take() {
            Some(waiting) if waiting.call == call => {
                self.complete(env, waiting, result);
                true
            }
            other => {
                self.assigning = other;
                false
            }
        }
    }

    /// Checks a call's output against the input it was given. A failed call (an
    /// error, a panic, a call past its budget, an answer breaking the contract) is
    /// counted in `env.failures` (`assignor_failures`) and gives way to the default
    /// assignor for this run (counted in `env.fallbacks`); the default failing too is
    /// what [`Self::finish`] gets.
    fn complete(
        &mut self,
        env: &Env<'_>,
        call: Assigning,
        result: Result<Assignment, PluginError>,
    ) {
        let checked = result.map_err(|e| e.to_string()).and_then(|output| {
            validate_against_input(&call.input, &output)
                .map_err(|e| format!("invalid assignment: {e}"))
        });
        match checked {
            Ok(checked) => {
                let target = checked
                    .into_iter()
                    .map(|(id, set)| (id.as_str().to_owned(), set))
                    .collect();
                // Members came, went or changed while a call handed out ran.
                let stale = call.call != 0
                    && !self.with_views(|views| {
                        same_members(
                            &build_input(self.id.as_str(), views, env.topics),
                            &call.input,
                        )
                    });
                let run = Assigned {
                    assignor: call.assignor,
                    target,
                    loads: call.loads,
                };
                self.finish(env, call.purpose, (call.epoch, stale), Ok(run));
            }
            Err(error) => {
                env.failures.set(env.failures.get() + 1);
                let default = default_assignor(env);
                if call.assignor == default {
                    let run = Err((call.assignor, error));
                    self.finish(env, call.purpose, (call.epoch, false), run);
                    return;
                }
                let assignor = call.assignor;
                tracing::warn!(
                    group = %self.id,
                    assignor,
                    default,
                    %error,
                    "assignor `{assignor}` failed; this run uses the default assignor `{default}`"
                );
                env.fallbacks.set(env.fallbacks.get() + 1);
                self.launch(env, call.purpose, default);
            }
        }
    }

    /// Acts on a finished run started at group epoch `epoch`, by `purpose`:
    ///
    /// - [`Purpose::Due`]: installs it (or, after a failure, the old target and a
    ///   retry time) as the target of `epoch`;
    /// - [`Purpose::Retry`]: a success is installed at a new group epoch (the members
    ///   learn of it); a failure schedules the next retry. A due run handed to the
    ///   host finishes as a retry (the target in force was installed when it
    ///   started);
    /// - [`Purpose::Drift`]: a target other than the one in force (or by another
    ///   assignor) is installed at a new group epoch; the same target, or a failure,
    ///   changes nothing.
    ///
    /// `epoch` is the group epoch the call started at; `stale` says that the members
    /// changed while it ran (only a call handed to the host can see that). A stale
    /// target is installed all the same for the members still there, and the group epoch bumped once more so that
    /// a run over the members as they are is due next: a result that comes back late
    /// is as good as the target in force until then.
    fn finish(
        &mut self,
        env: &Env<'_>,
        purpose: Purpose,
        (epoch, stale): (i32, bool),
        run: AssignorRun,
    ) {
        match purpose {
            Purpose::Due => self.install(env, epoch, run),
            Purpose::Retry | Purpose::Drift => {
                let wanted = match (&run, purpose) {
                    (Ok(_), Purpose::Retry) => true,
                    (Ok(r), _) => r.target != self.target || r.assignor != self.assignor,
                    (Err(_), _) => false,
                };
                if wanted {
                    if purpose == Purpose::Drift {
                        self.bump_epoch(RebalanceRecord::LOAD_DRIFT, env.now);
                        tracing::debug!(group = %self.id, epoch = self.epoch, "assignor inputs drifted: new target");
                    } else {
                        // A retry's target answers the series that failed: its cause.
                        self.epoch = self.epoch.saturating_add(1);
                    }
                    self.install(env, self.epoch, run);
                    if stale {
                        // Its target serves the members still there; a run over the
                        // members as they are is due next.
                        self.epoch = self.epoch.saturating_add(1);
                    }
                } else if purpose == Purpose::Retry {
                    self.retry_at = Some(
                        env.now
                            .saturating_add(u64::from(env.heartbeat_interval_ms.max(1))),
                    );
                }
            }
        }
    }

    /// Installs a new target as that of group epoch `epoch` with the loads its assignor
    /// saw, or after an assignor failure the old one and a retry time. Either way
    /// without members that have left, partitions of topics a member no longer
    /// subscribes to, and vanished partitions.
    fn install(&mut self, env: &Env<'_>, epoch: i32, result: AssignorRun) {
        let before = self.target_owners();
        let settled = result.is_ok();
        self.assignment_epoch = epoch;
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
                tracing::debug!(group = %self.id, epoch, assignor = %self.assignor, "new target assignment");
            }
            Err((assignor, message)) => {
                tracing::warn!(group = %self.id, epoch, %assignor, error = %message, "target assignment failed; the previous one stays until a retry succeeds");
                self.retry_at = Some(
                    env.now
                        .saturating_add(u64::from(env.heartbeat_interval_ms.max(1))),
                );
            }
        }
        self.prune_target(env);
        self.record_target(before, env.now, settled);
    }

    /// The target in force serves at group epoch `epoch` (a run was handed to the
    /// host): members move to that epoch keeping what the target gives them.
    fn install_previous(&mut self, env: &Env<'_>, epoch: i32) {
        let before = self.target_owners();
        self.assignment_epoch = epoch;
        self.assigned_at = Some(env.now);
        self.due_at = None;
        self.prune_target(env);
        self.record_target(before, env.now, false);
    }

    /// Drops from the target the members that have left, partitions of topics a
    /// member no longer subscribes to, and vanished partitions.
    fn prune_target(&mut self, env: &Env<'_>) {
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
    }

    /// When the target of the group epoch may be computed, if it is behind the group
    /// epoch and no assignor call is in flight (its result comes first): the
    /// assignor's last run plus the group's assignment interval,
    /// [`ASSIGNMENT_INTERVAL_US_PER_MEMBER`] per member (as many as at the first bump
    /// that waits, [`ConsumerGroup::due_at`]) and at most
    /// `consumer_assignment_interval_ms` (at once for a group never assigned). Joins
    /// arriving faster than that share one assignor run, so forming a group of `n`
    /// costs runs in proportion to the time it takes, not `n` runs over up to `n`
    /// members each (after KIP-1263's assignment interval, scaled to the group: a
    /// group of ten is assigned at once, one of 10,000 at most once a second).
    pub(super) fn target_due(&self, env: &Env<'_>) -> Option<u64> {
        if self.epoch <= self.assignment_epoch || self.assigning.is_some() {
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
            Some(due) if due <= env.now => self.start_assignment(env, Purpose::Due),
            // Fixed now: a group growing by joins would otherwise push its own due
            // time back as fast as time passes.
            Some(due) => self.due_at = Some(due),
            None => {}
        }
    }

    /// After an assignor failure, once the retry time has come: runs it again, and
    /// bumps the group epoch for its target if it succeeds.
    pub(super) fn maybe_retry(&mut self, env: &Env<'_>) {
        if self.retry_at.is_none_or(|at| at > env.now) {
            return;
        }
        self.start_assignment(env, Purpose::Retry);
    }
}

/// The default assignor's name, aliases resolved.
fn default_assignor(env: &Env<'_>) -> String {
    resolve_assignor(env, env.default_assignor).unwrap_or_else(|| env.default_assignor.to_owned())
}

/// Why a group runs its assignor ([`ConsumerGroup::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// The group epoch moved past the assignment epoch.
    Due,
    /// The last run failed and its retry time has come.
    Retry,
    /// The assignor's inputs drifted (`rerun_on_drift_ms`).
    Drift,
}

/// An assignor call a group waits for ([`ConsumerGroup::assigning`]).
#[derive(Debug)]
pub(crate) struct Assigning {
    /// The call's id (0 while it runs inline).
    call: u64,
    /// The group epoch it was started at.
    epoch: i32,
    /// The assignor called.
    assignor: String,
    /// Why.
    purpose: Purpose,
    /// What it was given (the output is checked against it).
    input: Arc<AssignInput>,
    /// The partition loads its context carried.
    loads: Vec<TopicSeenLoads>,
}
