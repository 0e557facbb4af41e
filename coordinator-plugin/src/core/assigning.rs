//! Assignor calls in flight, for every group type: the one place a group engine starts
//! an assignor call ([`GroupAssignors::call`]) and the table that routes a result
//! ([`Input::AssignorDone`](crate::Input::AssignorDone)) back to its group.
//!
//! A call goes to the host ([`Output::RunAssignor`](crate::Output::RunAssignor), run off
//! the coordinator's thread under the assignor's budget: [`crate::assignor_job`]) when
//! the assignor set offers a runner for it, which loaded plugins always do; otherwise
//! it runs inline and its result is there at once ([`Call::Done`]). Either way the
//! engine checks the output against the input it gave
//! ([`crate::assignors::validate_against_input`]), so one code path serves both.
//!
//! A group has at most one call it waits for; a call it no longer waits for (the group
//! started another, moved on, or is gone) is dropped when its result arrives. The table
//! holds one entry per call handed to the host until its result arrives: the host
//! answers every call within about two budgets (a call waits at most one for a thread,
//! then runs at most one), so it stays as small as the groups rebalancing.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use drover_abi::assignor::{AssignInput, Assignment};
use drover_abi::PluginError;

use crate::assignor_job::AssignorJob;
use crate::assignors::{Assignors, ContextParts};
use crate::types::GroupId;

/// How an assignor call went when it was started.
pub(crate) enum Call {
    /// It ran inline: its result.
    Done(Result<Assignment, PluginError>),
    /// It was handed to the host: the call's id, which the result will carry.
    Started(u64),
}

/// The calls of the input being handled, and those in flight.
#[derive(Debug, Default)]
pub(crate) struct AssignorCalls {
    /// The last call id given.
    last: Cell<u64>,
    /// Calls started during the input being handled, not yet output.
    started: RefCell<Vec<AssignorJob>>,
    /// Calls handed to the host, by id: the group that made each.
    in_flight: HashMap<u64, GroupId>,
}

impl AssignorCalls {
    /// The calls started since the last take, to output as `RunAssignor`; each is
    /// remembered until its result arrives.
    pub(crate) fn take_started(&mut self) -> Vec<AssignorJob> {
        let jobs = std::mem::take(self.started.get_mut());
        for job in &jobs {
            self.in_flight.insert(job.id, job.group.clone());
        }
        jobs
    }

    /// The result of call `id` arrived: the group that made it, if the call is known.
    pub(crate) fn finished(&mut self, id: u64) -> Option<GroupId> {
        self.in_flight.remove(&id)
    }
}

/// The assignors as a group engine sees them during one call: the loaded set, and
/// where calls handed to the host are recorded.
#[derive(Clone, Copy)]
pub(crate) struct GroupAssignors<'a> {
    set: &'a dyn Assignors,
    calls: &'a AssignorCalls,
}

impl<'a> GroupAssignors<'a> {
    pub(crate) fn new(set: &'a dyn Assignors, calls: &'a AssignorCalls) -> Self {
        GroupAssignors { set, calls }
    }

    /// Whether an assignor of that name is loaded.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// Calls assignor `name` for `group` with `input` and `context`: handed to the host
    /// when the set offers a runner ([`Call::Started`]), else inline ([`Call::Done`]).
    pub(crate) fn call(
        &self,
        group: &GroupId,
        name: &str,
        input: Arc<AssignInput>,
        context: ContextParts,
    ) -> Call {
        match self.set.runner(name) {
            Some(runner) => self.start(group, name, input, context, runner),
            None => Call::Done(
                context.lend(|context| self.set.assign_with_context(name, &input, context)),
            ),
        }
    }

    /// Whether assignor `name` is loaded and serves share groups (assignor ABI 3.3).
    pub(crate) fn serves_share_groups(&self, name: &str) -> bool {
        self.set.share_groups_supported(name)
    }

    /// Calls share assignor `name` for share group `group` (assignor ABI 3.3,
    /// `assign_share`), as [`call`](Self::call) does: handed to the host when the set
    /// offers a runner, else inline.
    pub(crate) fn call_share(
        &self,
        group: &GroupId,
        name: &str,
        input: Arc<AssignInput>,
        context: ContextParts,
    ) -> Call {
        match self.set.share_runner(name) {
            Some(runner) => self.start(group, name, input, context, runner),
            None => {
                Call::Done(context.lend(|context| self.set.assign_share(name, &input, context)))
            }
        }
    }

    /// Records a call to hand to the host with `runner`.
    fn start(
        &self,
        group: &GroupId,
        name: &str,
        input: Arc<AssignInput>,
        context: ContextParts,
        runner: crate::assignor_job::AssignorRunner,
    ) -> Call {
        let id = self.calls.last.get().wrapping_add(1);
        self.calls.last.set(id);
        self.calls.started.borrow_mut().push(AssignorJob {
            id,
            group: group.clone(),
            assignor: name.to_owned(),
            input,
            context,
            runner,
        });
        Call::Started(id)
    }
}
