//! How a share group gets its target assignment: from the share assignor it selects
//! (`share_group_assignors`, else `share_assignor`; docs/operations.md), which is the
//! in-tree [`simple`] one or a loaded assignor plugin that serves share groups
//! (assignor ABI 3.3, `Assignor::assign_share`).
//!
//! A plugin's call goes through the coordinator's one call path
//! ([`crate::core::assigning`]): handed to the host, which runs it off the coordinator
//! thread under `coordinator.assignor_timeout_ms`, its result coming back as
//! `AssignorDone`. Meanwhile the target in force serves at the new group epoch (a
//! share member has nothing to revoke, so an older target is a valid one), and the
//! result is installed at a further epoch, which members notice on their next
//! heartbeat. A group has at most one call in flight; a change during it makes the
//! result stale, dropped for a run over the group as it is then.
//!
//! `simple` runs instead, inline and at once, when the selected plugin is not loaded
//! or does not serve share groups (an assignor built before 3.3 never does), when
//! its call fails or runs past its budget, and when its output breaks the
//! share-assignor contract ([`validate_share_against_input`]): each counted in
//! `assignor_fallbacks` (and the failures in `assignor_failures`) as effects of the
//! call's result (`core/result.rs`), as for other group types, so a share group always
//! has a target.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_abi::assignor::Assignment;
use drover_abi::PluginError;

use super::group::{ShareCall, ShareGroup};
use super::{simple, Env};
use crate::assignors::{build_input, validate_share_against_input, ContextParts, MemberView};
use crate::core::assigning::Call;
use crate::core::result::Effects;
use crate::io::CoordinatorCounter;
use crate::types::{ConsumerId, TopicPartition};

impl ShareGroup {
    /// Bumps the group epoch, refreshes the metadata and computes the target at the
    /// new epoch with the group's share assignor (or starts its call).
    pub(super) fn bump_and_assign(&mut self, env: &Env<'_>, fx: &mut Effects<'_>) {
        self.epoch = self.epoch.saturating_add(1);
        self.metadata = self.compute_metadata(env.topics);
        tracing::debug!(group = %self.id, epoch = self.epoch, "share group epoch bumped");
        self.start_assignment(env, fx);
    }

    /// Computes the target for the group epoch, or starts a plugin's call for it.
    /// With a call in flight nothing starts: its result, stale by then, is followed by
    /// a run over the group as it is.
    fn start_assignment(&mut self, env: &Env<'_>, fx: &mut Effects<'_>) {
        if self.assigning.is_some() {
            return;
        }
        let selected = env.selected_assignor(&self.id);
        if selected == simple::SIMPLE || self.members.is_empty() {
            return self.assign_simple();
        }
        if !env.assignors.serves_share_groups(selected) {
            tracing::warn!(
                group = %self.id,
                assignor = selected,
                "share assignor `{selected}` is not loaded or does not serve share groups \
                 (assignor ABI 3.3); the group uses `simple`"
            );
            fx.metric(CoordinatorCounter::AssignorFallbacks, 1);
            return self.assign_simple();
        }
        let ids: Vec<ConsumerId> = self.members.keys().map(ConsumerId::new).collect();
        let none = BTreeSet::new();
        let views: Vec<MemberView<'_>> = self
            .members
            .values()
            .zip(&ids)
            .map(|(m, id)| {
                let owned = self.target.get(&m.id).unwrap_or(&none);
                MemberView::kafka(id, &m.names, owned, m.rack_id.as_deref())
            })
            .collect();
        let input = Arc::new(build_input(self.id.as_str(), &views, env.topics));
        // A share group commits no offsets: its progress is share-partition state.
        let context = ContextParts::build(&views, env.topics, env.partition_stats, [])
            .aged(env.partition_stats, env.now);
        let mut call = ShareCall {
            call: 0,
            epoch: self.epoch,
            assignor: selected.to_owned(),
            input: Arc::clone(&input),
        };
        match env.assignors.call_share(&self.id, selected, input, context) {
            Call::Done(result) => self.complete(env, fx, call, result),
            Call::Started(id) => {
                // The target in force serves at this epoch until the result is back.
                self.assignment_epoch = self.epoch;
                call.call = id;
                self.assigning = Some(call);
            }
        }
    }

    /// The `simple` target of the members as they are, at the group epoch.
    fn assign_simple(&mut self) {
        let subscriptions = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.names.clone()))
            .collect();
        let target = simple::assign(&subscriptions, &self.metadata);
        self.install(target, simple::SIMPLE.to_owned());
    }

    /// Makes `target`, computed by `assignor`, the target at the group epoch; at a new
    /// one when the previous target already served at this epoch (while a call ran), so
    /// that members notice.
    fn install(&mut self, target: BTreeMap<String, BTreeSet<TopicPartition>>, assignor: String) {
        if self.assignment_epoch == self.epoch {
            self.epoch = self.epoch.saturating_add(1);
        }
        self.target = target;
        self.target_assignor = assignor;
        self.assignment_epoch = self.epoch;
    }

    /// The result of assignor call `call` arrived: taken if the group waits for it.
    /// Returns whether it was.
    pub(super) fn assignor_done(
        &mut self,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        call: u64,
        result: Result<Assignment, PluginError>,
    ) -> bool {
        let Some(waiting) = self.assigning.take_if(|w| w.call == call) else {
            return false;
        };
        self.complete(env, fx, waiting, result);
        true
    }

    /// Installs a call's checked output as the target; a failed call or a broken
    /// output gives way to `simple` (counted). A result for an older epoch is dropped
    /// for a new run.
    fn complete(
        &mut self,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        call: ShareCall,
        result: Result<Assignment, PluginError>,
    ) {
        let checked = result.map_err(|e| e.to_string()).and_then(|output| {
            validate_share_against_input(&call.input, &output)
                .map_err(|e| format!("invalid share assignment: {e}"))
        });
        match checked {
            Ok(_) if call.epoch != self.epoch => {
                tracing::debug!(group = %self.id, call = call.call, "stale share assignment dropped; running again");
                self.start_assignment(env, fx);
            }
            Ok(target) => {
                let target = target
                    .into_iter()
                    .map(|(id, set)| (id.as_str().to_owned(), set))
                    .collect();
                self.install(target, call.assignor);
            }
            Err(why) => {
                tracing::warn!(
                    group = %self.id,
                    assignor = %call.assignor,
                    "share assignor `{}` failed ({why}); the group uses `simple`",
                    call.assignor
                );
                fx.metric(CoordinatorCounter::AssignorFailures, 1);
                fx.metric(CoordinatorCounter::AssignorFallbacks, 1);
                self.assign_simple();
            }
        }
    }
}
