//! A time budget for every assignor call (`coordinator.assignor_timeout_ms`; issue 28
//! item 2, after Kafka's KIP-1263, which takes assignments off the group coordinator's
//! thread the same way).
//!
//! From coordinator ABI 3.6 the coordinator hands its assignor calls to the host, which
//! runs them on a thread per assignor ([`crate::coordination::driver`]'s
//! `assignor_runs`): a slow call holds only its own groups. An older coordinator calls
//! assignors synchronously from inside `handle`, on the one coordinator thread, where an
//! assignor that takes 20 s would hold every group of the broker for 20 s. Either way
//! the call must end: a plugin that loops forever would hold its groups (or, with an
//! older coordinator, every group) forever. So the host does not
//! hand the coordinator the plugins' own assignor instances: [`AssignorBudgets::named`]
//! wraps each in a host-implemented `Assignor` (`#[sabi_trait]` objects can be built by
//! any crate that has the trait, the host included) that
//!
//! - copies the input and the context (the context is only lent for the call) and runs
//!   the plugin's call on a worker thread of that plugin (kept between calls: a hand-off,
//!   not a thread start, per call; docs/benchmarks.md has its cost);
//! - waits at most the budget. Past it the call is **abandoned**: the wrapper returns an
//!   [`ErrorKind::Unavailable`](drover_abi::ErrorKind::Unavailable) error, which the core treats as any assignor failure
//!   (the rebalance runs the default assignor, counted as a fallback and a failure), and
//!   the worker thread is left to finish on its own;
//! - while a call of a plugin runs past its budget, the plugin is **slow**: further calls
//!   to it fail at once, without a thread, so a plugin that never returns costs the
//!   calling thread one budget and then nothing. It shows in `GET /v1/plugins` and
//!   `drover plugins list --admin` (`slow`), in the metrics
//!   (`drover_assignor_timeouts_total{assignor}`, `drover_assignor_calls_overdue{assignor}`
//!   and `drover_assignor_calls_refused_total{assignor}`), and native groups naming it
//!   report the fallback in the admin API. When the abandoned call returns, its result is
//!   dropped, its thread serves the plugin again and the plugin is no longer slow (logged).
//!
//! Threads: at most [`MAX_THREADS_PER_PLUGIN`] per plugin instance, abandoned ones
//! included; an idle worker exits when the plugin instance is replaced or removed and the
//! coordinator no longer holds it. Overdue calls are kept per assignor *name*, across its
//! instances: an instance that replaces one with an abandoned call is slow from the
//! start, so replacing a stuck plugin (a rescan, the file removed and added back) starts
//! no further stuck threads, and `slow` and `drover_assignor_calls_overdue` count every
//! instance's calls.

use std::{
    collections::BTreeMap,
    sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Weak},
    time::{Duration, Instant},
};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RArc, RResult, RSlice, RString, RVec},
};
use drover_abi::{
    assignor::{
        AssignContext, AssignContextRef, AssignInput, Assignment, Assignor, AssignorArc,
        Assignor_TO, BrokerContext, MemberContext, TopicContext,
    },
    coordinator::NamedAssignor,
    PluginError,
};

use crate::{metrics::Metrics, plugins::AssignorHandle};

/// The most worker threads one assignor plugin instance gets, abandoned ones (still in
/// a call past its budget) included. The coordinator calls from one thread, so one is
/// busy at a time; the others cover concurrent callers.
pub const MAX_THREADS_PER_PLUGIN: usize = 4;

/// The budgets of the broker's assignors, and their slow state (one per plugin
/// instance, kept while the instance is loaded).
pub struct AssignorBudgets {
    budget: Option<Duration>,
    metrics: Arc<Metrics>,
    /// Each assignor's instance (kept so that its address identifies it) and budget.
    plugins: Mutex<BTreeMap<String, Wrapped>>,
    /// Per assignor name, its calls running past their budget, whichever instance made
    /// them: an instance that replaces one with an abandoned call (a rescan, or the
    /// file removed and added back) is slow too until that call returns, so replacing a
    /// stuck plugin cannot start stuck threads past the cap.
    overdue: Mutex<BTreeMap<String, Overdue>>,
}

/// The calls of one assignor name running past their budget, across its instances.
type Overdue = Arc<Mutex<Vec<OverdueCall>>>;

/// A call running past its budget.
struct OverdueCall {
    /// The instance's budget that made it ([`Budget::id`]).
    instance: u64,
    /// Its number in that instance.
    call: u64,
    /// The group it assigns.
    group: String,
    /// When it started.
    started: Instant,
}

/// Numbers the budgets of the process, for [`OverdueCall::instance`].
static NEXT_BUDGET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// An assignor instance (kept so that its address identifies it) and its budget.
type Wrapped = (Arc<AssignorHandle>, Arc<Budget>);

/// Why a plugin is slow now: what `GET /v1/plugins` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowReport {
    /// Calls running past their budget now.
    pub overdue: usize,
    /// The oldest of them: its group, and how long it has run, ms.
    pub oldest_group: String,
    /// See `oldest_group`.
    pub oldest_running_ms: u64,
    /// The budget, ms.
    pub budget_ms: u64,
}

impl std::fmt::Display for SlowReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a call for group `{}` has run {} ms past its {} ms budget and not returned \
             ({} call(s) overdue); calls fail at once and groups use the default assignor \
             until it returns",
            self.oldest_group,
            self.oldest_running_ms.saturating_sub(self.budget_ms),
            self.budget_ms,
            self.overdue
        )
    }
}

impl AssignorBudgets {
    /// Budgets of `timeout_ms` per call (`coordinator.assignor_timeout_ms`); 0 turns
    /// them off (assignors run on the caller's thread, as before issue 28).
    pub fn new(timeout_ms: u64, metrics: Arc<Metrics>) -> Self {
        AssignorBudgets {
            budget: (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms)),
            metrics,
            plugins: Mutex::new(BTreeMap::new()),
            overdue: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Wrapped>> {
        self.plugins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The assignors as the coordinator receives them (startup, `AssignorsChanged`):
    /// each wrapped in its budget. An instance wrapped before keeps its state (a call
    /// overdue stays overdue); instances no longer in `assignors` are forgotten, but
    /// their overdue calls still make the name slow (a new instance of it is refused
    /// until they return).
    pub fn named(&self, assignors: &BTreeMap<String, Arc<AssignorHandle>>) -> RVec<NamedAssignor> {
        let Some(budget) = self.budget else {
            return assignors
                .iter()
                .map(|(name, handle)| NamedAssignor {
                    name: RString::from(name.as_str()),
                    assignor: handle.instance(),
                })
                .collect();
        };
        let mut plugins = self.lock();
        let mut kept = BTreeMap::new();
        let named = assignors
            .iter()
            .map(|(name, handle)| {
                let state = match plugins.remove(name) {
                    Some((h, b)) if Arc::ptr_eq(&h, handle) => b,
                    _ => Arc::new(Budget::new(
                        name,
                        handle.instance(),
                        budget,
                        Arc::clone(&self.metrics),
                        self.overdue_of(name),
                    )),
                };
                kept.insert(name.clone(), (Arc::clone(handle), Arc::clone(&state)));
                NamedAssignor {
                    name: RString::from(name.as_str()),
                    assignor: Budgeted::arc(state),
                }
            })
            .collect();
        *plugins = kept;
        named
    }

    /// The overdue calls of assignor name `name`, shared by its instances.
    fn overdue_of(&self, name: &str) -> Overdue {
        let mut all = self.overdue.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(all.entry(name.to_owned()).or_default())
    }

    /// Whether assignor `name` is slow now (a call of it runs past its budget), and why.
    pub fn slow(&self, name: &str) -> Option<SlowReport> {
        let budget = self.lock().get(name).map(|(_, b)| Arc::clone(b))?;
        budget.slow()
    }

    /// The budget per call, ms (0: off).
    pub fn budget_ms(&self) -> u64 {
        self.budget.map_or(0, |b| b.as_millis() as u64)
    }
}

/// One plugin instance's budget and workers.
struct Budget {
    /// Unique in the process (numbers its overdue calls' instance).
    id: u64,
    name: String,
    inner: AssignorArc,
    /// Whether the plugin serves share groups (assignor ABI 3.3), asked once when the
    /// instance is wrapped: the coordinator asks on its own thread, which a plugin's
    /// call must never hold.
    share: bool,
    limit: Duration,
    metrics: Arc<Metrics>,
    state: Mutex<BudgetState>,
    /// The overdue calls of every instance of this assignor name.
    overdue: Overdue,
}

#[derive(Default)]
struct BudgetState {
    /// Workers waiting for a call.
    idle: Vec<mpsc::Sender<Job>>,
    /// Worker threads alive (idle, busy or abandoned).
    threads: usize,
    /// Calls so far (numbers the overdue ones).
    calls: u64,
}

/// One call handed to a worker.
struct Job {
    call: u64,
    /// A share group's call (`assign_share`, assignor ABI 3.3).
    share: bool,
    input: AssignInput,
    context: Option<OwnedContext>,
    slot: Arc<Slot>,
    /// The worker's own queue, to put itself back on the idle list when its caller gave
    /// up on it.
    home: mpsc::Sender<Job>,
}

/// A copy of an [`AssignContext`], which is lent only for the duration of a call.
struct OwnedContext {
    members: Vec<MemberContext>,
    brokers: Vec<BrokerContext>,
    topics: Vec<TopicContext>,
    /// Assignor ABI 3.2's age of the partition data (`None` from an older coordinator).
    partition_data_age_ms: Option<u64>,
}

impl OwnedContext {
    fn copy(context: AssignContextRef<'_>) -> Self {
        OwnedContext {
            members: context.members().to_vec(),
            brokers: context.brokers().to_vec(),
            topics: context.topics().to_vec(),
            partition_data_age_ms: context
                .partition_data_age_ms()
                .and_then(|a| a.into_option()),
        }
    }

    fn lend<R>(&self, f: impl FnOnce(AssignContextRef<'_>) -> R) -> R {
        AssignContext {
            members: RSlice::from_slice(&self.members),
            brokers: RSlice::from_slice(&self.brokers),
            topics: RSlice::from_slice(&self.topics),
            partition_data_age_ms: self.partition_data_age_ms.into(),
        }
        .lend(f)
    }
}

/// Where a worker leaves a call's result, unless the caller gave up first.
struct Slot {
    state: Mutex<SlotState>,
    done: Condvar,
}

enum SlotState {
    Running,
    Done(RResult<Assignment, PluginError>),
    Abandoned,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Budget {
    fn new(
        name: &str,
        inner: AssignorArc,
        limit: Duration,
        metrics: Arc<Metrics>,
        overdue: Overdue,
    ) -> Self {
        let now = overdue.lock().unwrap_or_else(|e| e.into_inner()).len();
        metrics.assignor_overdue(name, now);
        Budget {
            id: NEXT_BUDGET.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            name: name.to_owned(),
            share: inner.share_groups_supported(),
            inner,
            limit,
            metrics,
            state: Mutex::new(BudgetState::default()),
            overdue,
        }
    }

    fn overdue(&self) -> MutexGuard<'_, Vec<OverdueCall>> {
        self.overdue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slow(&self) -> Option<SlowReport> {
        let overdue = self.overdue();
        let oldest = overdue.first()?;
        Some(SlowReport {
            overdue: overdue.len(),
            oldest_group: oldest.group.clone(),
            oldest_running_ms: oldest.started.elapsed().as_millis() as u64,
            budget_ms: self.limit.as_millis() as u64,
        })
    }

    /// Runs one call on a worker and waits at most the budget for it.
    fn call(
        self: &Arc<Self>,
        input: &AssignInput,
        context: Option<AssignContextRef<'_>>,
        share: bool,
    ) -> RResult<Assignment, PluginError> {
        if let Some(oldest) = self.overdue().first() {
            self.metrics.assignor_refused(&self.name);
            return RResult::RErr(PluginError::unavailable(format!(
                "assignor `{}` is slow: its call for group `{}` has run {} ms, past its {} \
                 ms budget (coordinator.assignor_timeout_ms), and has not returned; not \
                 called",
                self.name,
                oldest.group,
                oldest.started.elapsed().as_millis(),
                self.limit.as_millis()
            )));
        }
        let (worker, call) = {
            let mut state = self.lock();
            let worker = match state.idle.pop() {
                Some(worker) => worker,
                None if state.threads < MAX_THREADS_PER_PLUGIN => match self.spawn() {
                    Ok(worker) => {
                        state.threads += 1;
                        worker
                    }
                    Err(e) => {
                        return RResult::RErr(PluginError::unavailable(format!(
                            "assignor `{}`: cannot start a worker thread: {e}",
                            self.name
                        )))
                    }
                },
                None => {
                    self.metrics.assignor_refused(&self.name);
                    return RResult::RErr(PluginError::unavailable(format!(
                        "assignor `{}`: all {MAX_THREADS_PER_PLUGIN} of its worker threads \
                         are busy",
                        self.name
                    )));
                }
            };
            state.calls += 1;
            (worker, state.calls)
        };
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState::Running),
            done: Condvar::new(),
        });
        let started = Instant::now();
        let job = Job {
            call,
            share,
            input: input.clone(),
            context: context.map(OwnedContext::copy),
            slot: Arc::clone(&slot),
            home: worker.clone(),
        };
        if worker.send(job).is_err() {
            // The worker is gone (it cannot exit while its queue is open: a bug).
            self.lock().threads -= 1;
            return RResult::RErr(PluginError::internal(format!(
                "assignor `{}`: its worker thread is gone",
                self.name
            )));
        }
        let deadline = started + self.limit;
        let mut guard = slot.lock();
        loop {
            match std::mem::replace(&mut *guard, SlotState::Running) {
                SlotState::Done(result) => {
                    drop(guard);
                    self.lock().idle.push(worker);
                    return result;
                }
                SlotState::Running | SlotState::Abandoned => {}
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            guard = slot
                .done
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *guard = SlotState::Abandoned;
        drop(guard);
        let group = input.group.to_string();
        let overdue = {
            let mut overdue = self.overdue();
            overdue.push(OverdueCall {
                instance: self.id,
                call,
                group: group.clone(),
                started,
            });
            overdue.len()
        };
        self.metrics.assignor_timeout(&self.name);
        self.metrics.assignor_overdue(&self.name, overdue);
        tracing::error!(
            assignor = %self.name,
            group,
            budget_ms = self.limit.as_millis() as u64,
            "assignor `{}` did not return within its {} ms budget \
             (coordinator.assignor_timeout_ms): the call is abandoned, this rebalance runs \
             the default assignor, and the plugin is marked slow until the call returns",
            self.name,
            self.limit.as_millis()
        );
        RResult::RErr(PluginError::unavailable(format!(
            "assignor `{}` did not return within its {} ms budget \
             (coordinator.assignor_timeout_ms); the call was abandoned",
            self.name,
            self.limit.as_millis()
        )))
    }

    fn spawn(self: &Arc<Self>) -> std::io::Result<mpsc::Sender<Job>> {
        let (tx, rx) = mpsc::channel::<Job>();
        let budget = Arc::downgrade(self);
        let inner = self.inner.clone();
        std::thread::Builder::new()
            .name(format!("drover-assignor-{}", self.name))
            .spawn(move || worker(rx, inner, budget))?;
        Ok(tx)
    }

    /// An abandoned call returned after `took`: the plugin is no longer slow once none
    /// is left; the worker serves it again.
    fn returned_late(&self, call: u64, group: &str, took: Duration, home: mpsc::Sender<Job>) {
        self.lock().idle.push(home);
        let left = {
            let mut overdue = self.overdue();
            overdue.retain(|o| o.instance != self.id || o.call != call);
            overdue.len()
        };
        self.metrics.assignor_overdue(&self.name, left);
        tracing::warn!(
            assignor = %self.name,
            group,
            took_ms = took.as_millis() as u64,
            budget_ms = self.limit.as_millis() as u64,
            overdue = left,
            "assignor `{}`'s abandoned call returned after {} ms (its result is dropped){}",
            self.name,
            took.as_millis(),
            if left == 0 {
                "; it is no longer slow"
            } else {
                ""
            }
        );
    }
}

/// A worker thread: runs the calls sent to it until its queue closes, or until its
/// plugin instance is gone when an abandoned call returns.
fn worker(rx: mpsc::Receiver<Job>, inner: AssignorArc, budget: Weak<Budget>) {
    while let Ok(job) = rx.recv() {
        let started = Instant::now();
        let result = match &job.context {
            Some(context) if job.share => context.lend(|c| inner.assign_share(&job.input, c)),
            Some(context) => context.lend(|c| inner.assign_with_context(&job.input, c)),
            None => inner.assign(&job.input),
        };
        let mut slot = job.slot.lock();
        match *slot {
            SlotState::Abandoned => {
                drop(slot);
                let Some(budget) = budget.upgrade() else {
                    return;
                };
                budget.returned_late(
                    job.call,
                    job.input.group.as_str(),
                    started.elapsed(),
                    job.home,
                );
            }
            _ => {
                *slot = SlotState::Done(result);
                job.slot.done.notify_one();
            }
        }
    }
}

/// The host's `Assignor` handed to the coordinator: the plugin's, under its budget.
struct Budgeted(Arc<Budget>);

impl Budgeted {
    fn arc(budget: Arc<Budget>) -> AssignorArc {
        RArc::new(Assignor_TO::from_value(Budgeted(budget), TD_Opaque))
    }
}

impl Assignor for Budgeted {
    fn assign(&self, input: &AssignInput) -> RResult<Assignment, PluginError> {
        self.0.call(input, None, false)
    }

    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> RResult<Assignment, PluginError> {
        self.0.call(input, Some(context), false)
    }

    fn share_groups_supported(&self) -> bool {
        self.0.share
    }

    fn assign_share(
        &self,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> RResult<Assignment, PluginError> {
        if !self.0.share {
            return RResult::RErr(PluginError::unsupported(format!(
                "assignor `{}` does not serve share groups",
                self.0.name
            )));
        }
        self.0.call(input, Some(context), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_abi::{assignor::context::empty_context, ErrorKind, MemberAssignment};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Sleeps `sleep_ms` (changeable) in every call and answers an empty assignment
    /// naming the group as its one member; counts calls.
    struct Sleepy {
        sleep_ms: Arc<AtomicU64>,
        calls: Arc<AtomicU64>,
    }

    impl Assignor for Sleepy {
        fn assign(&self, input: &AssignInput) -> RResult<Assignment, PluginError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(self.sleep_ms.load(Ordering::SeqCst)));
            RResult::ROk(Assignment {
                members: vec![MemberAssignment {
                    member_id: input.group.clone(),
                    partitions: RVec::new(),
                }]
                .into(),
            })
        }
    }

    fn budget(
        limit_ms: u64,
        sleep_ms: u64,
    ) -> (Arc<Budget>, Arc<AtomicU64>, Arc<AtomicU64>, AssignorArc) {
        let sleep = Arc::new(AtomicU64::new(sleep_ms));
        let calls = Arc::new(AtomicU64::new(0));
        let inner = RArc::new(Assignor_TO::from_value(
            Sleepy {
                sleep_ms: Arc::clone(&sleep),
                calls: Arc::clone(&calls),
            },
            TD_Opaque,
        ));
        let b = Arc::new(Budget::new(
            "sleepy",
            inner,
            Duration::from_millis(limit_ms),
            Arc::new(Metrics::new()),
            Overdue::default(),
        ));
        let wrapped = Budgeted::arc(Arc::clone(&b));
        (b, sleep, calls, wrapped)
    }

    fn input(group: &str) -> AssignInput {
        AssignInput {
            group: group.into(),
            members: RVec::new(),
            topics: RVec::new(),
        }
    }

    fn call(a: &AssignorArc, group: &str) -> Result<Assignment, PluginError> {
        empty_context(|c| a.assign_with_context(&input(group), c)).into_result()
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_call_within_its_budget_answers_and_reuses_its_thread() {
        let (b, _, calls, a) = budget(5_000, 0);
        for g in ["g1", "g2", "g3"] {
            let out = call(&a, g).unwrap();
            assert_eq!(out.members[0].member_id.as_str(), g);
        }
        // Without a context too (a coordinator built against assignor 3.0's vtable).
        assert_eq!(a.assign(&input("g4")).unwrap().members.len(), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(b.lock().threads, 1, "one worker, handed every call");
        assert!(b.slow().is_none());
    }

    /// A share assignor (assignor ABI 3.3): its `assign_share` runs on a worker
    /// under the budget like any call (and `assign` never does for it).
    struct Sharer(Arc<AtomicU64>);

    impl Assignor for Sharer {
        fn assign(&self, _: &AssignInput) -> RResult<Assignment, PluginError> {
            RResult::RErr(PluginError::internal("not for share groups"))
        }

        fn share_groups_supported(&self) -> bool {
            true
        }

        fn assign_share(
            &self,
            input: &AssignInput,
            _: AssignContextRef<'_>,
        ) -> RResult<Assignment, PluginError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            RResult::ROk(Assignment {
                members: vec![MemberAssignment {
                    member_id: input.group.clone(),
                    partitions: RVec::new(),
                }]
                .into(),
            })
        }
    }

    #[test]
    fn share_calls_pass_the_budget_only_to_assignors_that_serve_share_groups() {
        // Sleepy serves no share groups (as an assignor built before 3.3).
        let (_, _, calls, sleepy) = budget(5_000, 0);
        assert!(!sleepy.share_groups_supported());
        let e = empty_context(|c| sleepy.assign_share(&input("g"), c).into_result()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert_eq!(calls.load(Ordering::SeqCst), 0, "never entered the plugin");
        let shares = Arc::new(AtomicU64::new(0));
        let inner = RArc::new(Assignor_TO::from_value(
            Sharer(Arc::clone(&shares)),
            TD_Opaque,
        ));
        let b = Arc::new(Budget::new(
            "sharer",
            inner,
            Duration::from_millis(5_000),
            Arc::new(Metrics::new()),
            Overdue::default(),
        ));
        let a = Budgeted::arc(Arc::clone(&b));
        assert!(a.share_groups_supported());
        let out = empty_context(|c| a.assign_share(&input("q"), c).into_result()).unwrap();
        assert_eq!(out.members[0].member_id.as_str(), "q");
        assert_eq!(shares.load(Ordering::SeqCst), 1);
        assert_eq!(b.lock().threads, 1, "run on a worker");
    }

    #[test]
    fn a_call_past_its_budget_is_abandoned_and_the_plugin_is_slow_until_it_returns() {
        let (b, sleep, calls, a) = budget(50, 400);
        let started = Instant::now();
        let e = call(&a, "slow-group").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(e.message.contains("budget"), "{}", e.message);
        assert!(
            started.elapsed() < Duration::from_millis(400),
            "waited the budget only"
        );
        let slow = b.slow().expect("slow");
        assert_eq!(
            (slow.overdue, slow.oldest_group.as_str()),
            (1, "slow-group")
        );
        // While it runs, calls fail at once without entering the plugin.
        sleep.store(0, Ordering::SeqCst);
        let t = Instant::now();
        let e = call(&a, "other").unwrap_err();
        assert!(e.message.contains("is slow"), "{}", e.message);
        assert!(t.elapsed() < Duration::from_millis(50));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // It returns: no longer slow, and its thread serves the next call.
        wait_until("the abandoned call to return", || b.slow().is_none());
        assert_eq!(call(&a, "g").unwrap().members[0].member_id.as_str(), "g");
        assert_eq!(b.lock().threads, 1);
    }

    /// An instance that replaces one whose call is overdue (a rescan, or the file
    /// removed and added back) is slow too until that call returns: replacing a stuck
    /// plugin again and again starts no more stuck threads (found by a review: six
    /// remove/re-add cycles of a stuck assignor left six stuck threads).
    #[test]
    fn a_new_instance_of_a_name_with_an_overdue_call_is_slow_too() {
        let (old, sleep, _, a) = budget(30, 300);
        assert!(call(&a, "stuck-group").is_err());
        let fresh = Arc::new(Budget::new(
            "sleepy",
            old.inner.clone(),
            Duration::from_millis(30),
            Arc::clone(&old.metrics),
            Arc::clone(&old.overdue),
        ));
        let b = Budgeted::arc(Arc::clone(&fresh));
        sleep.store(0, Ordering::SeqCst);
        let e = call(&b, "other").unwrap_err();
        assert!(e.message.contains("is slow"), "{}", e.message);
        assert_eq!(
            fresh.lock().threads,
            0,
            "no thread started for the refused call"
        );
        assert_eq!(fresh.slow().expect("slow").oldest_group, "stuck-group");
        // The old instance's call returns: the new one serves.
        wait_until("the abandoned call to return", || fresh.slow().is_none());
        assert_eq!(call(&b, "g").unwrap().members[0].member_id.as_str(), "g");
    }

    #[test]
    fn a_call_that_never_returns_costs_one_budget_and_a_bounded_number_of_threads() {
        let (b, _, calls, a) = budget(30, 3_600_000);
        assert!(call(&a, "stuck").is_err());
        for _ in 0..20 {
            let t = Instant::now();
            assert!(call(&a, "g").is_err());
            assert!(t.elapsed() < Duration::from_millis(30), "refused at once");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(b.lock().threads, 1);
        assert!(b.slow().unwrap().to_string().contains("`stuck`"));
    }

    #[test]
    fn concurrent_callers_get_at_most_the_thread_cap() {
        let (b, _, _, a) = budget(2_000, 200);
        let handles: Vec<_> = (0..MAX_THREADS_PER_PLUGIN + 2)
            .map(|i| {
                let a = a.clone();
                std::thread::spawn(move || call(&a, &format!("g{i}")).is_ok())
            })
            .collect();
        let ok = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        // Up to the cap run at once; the callers beyond it are refused (or, if a worker
        // was back already, served).
        assert!(ok >= MAX_THREADS_PER_PLUGIN, "{ok}");
        assert!(b.lock().threads <= MAX_THREADS_PER_PLUGIN);
    }

    #[test]
    fn an_idle_worker_exits_when_its_instance_is_replaced() {
        // What a rescan does to a replaced assignor: the coordinator and the budgets
        // drop their wrapper of the old instance. Its idle worker must exit with it (and
        // drop the plugin's instance), or every replaced version would keep a thread, its
        // stack and its allocator arena (issue 28 item 4).
        let (b, _, calls, a) = budget(5_000, 0);
        assert!(call(&a, "g").is_ok());
        assert_eq!(b.lock().threads, 1);
        let before = Arc::strong_count(&calls);
        assert_eq!(before, 2, "the test's and the instance's");
        drop(a);
        drop(b);
        wait_until("the worker to exit and drop the instance", || {
            Arc::strong_count(&calls) == 1
        });
    }

    #[test]
    fn a_budget_of_zero_hands_the_plugin_as_is() {
        let budgets = AssignorBudgets::new(0, Arc::new(Metrics::new()));
        assert_eq!(budgets.budget_ms(), 0);
        assert!(budgets.named(&BTreeMap::new()).is_empty());
        assert!(budgets.slow("x").is_none());
    }
}
