//! Assignor calls the host runs off the coordinator's thread (issue 28 item 2, after
//! Kafka's KIP-1263; coordinator ABI 3.6).
//!
//! A group that needs a target hands its assignor call to the host as an
//! [`Output::RunAssignor`](crate::Output::RunAssignor): an [`AssignorJob`] owning the
//! input, the context and the assignor instance. The host runs [`AssignorJob::run`] on
//! a thread of its own, under the assignor's time budget, and delivers the result as
//! [`Input::AssignorDone`](crate::Input::AssignorDone) with the job's [`id`]
//! (`AssignorJob::id`). Meanwhile the coordinator serves every other input: one slow
//! strategy holds only the groups that wait for it.
//!
//! Whether a call goes to the host is the [`Assignors`](crate::Assignors)
//! implementation's choice ([`Assignors::runner`](crate::Assignors::runner)): the
//! loaded plugins ([`AssignorSet`](crate::AssignorSet)) always do; an in-process
//! assignor that gives no runner is called inline, inside `handle`, as before
//! coordinator ABI 3.6 (unit tests, benchmarks).
//!
//! [`id`]: AssignorJob::id

use std::sync::Arc;

use drover_abi::assignor::{AssignContextRef, AssignInput, Assignment};
use drover_abi::PluginError;

use crate::assignors::ContextParts;
use crate::types::GroupId;

/// An assignor instance that can be called from any thread: `(input, context) ->
/// output`, the context lent only for the call. Errors: the assignor's.
pub type AssignorRunner = Arc<
    dyn Fn(&AssignInput, AssignContextRef<'_>) -> Result<Assignment, PluginError> + Send + Sync,
>;

/// One assignor call, owned: what [`Output::RunAssignor`](crate::Output::RunAssignor)
/// carries. The coordinator keeps a copy of the input (shared, not cloned) to check the
/// output against when the result comes back.
pub struct AssignorJob {
    pub(crate) id: u64,
    pub(crate) group: GroupId,
    pub(crate) assignor: String,
    pub(crate) input: Arc<AssignInput>,
    pub(crate) context: ContextParts,
    pub(crate) runner: AssignorRunner,
}

impl AssignorJob {
    /// The call's id: its result is `Input::AssignorDone { call: id, .. }`.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The group the call assigns.
    pub fn group(&self) -> &GroupId {
        &self.group
    }

    /// The assignor's name.
    pub fn assignor(&self) -> &str {
        &self.assignor
    }

    /// Runs the call on the caller's thread: the assignor's output (unchecked; the
    /// coordinator checks it) or its error. May take as long as the assignor does.
    pub fn run(&self) -> Result<Assignment, PluginError> {
        self.context
            .lend(|context| (self.runner)(&self.input, context))
    }
}

impl std::fmt::Debug for AssignorJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssignorJob")
            .field("id", &self.id)
            .field("group", &self.group)
            .field("assignor", &self.assignor)
            .field("members", &self.input.members.len())
            .finish_non_exhaustive()
    }
}

/// Two jobs are the same call when their ids are.
impl PartialEq for AssignorJob {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
