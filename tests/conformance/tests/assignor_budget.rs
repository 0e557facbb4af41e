//! The host's time budget for assignor calls (`coordinator.assignor_timeout_ms`,
//! host/src/coordination/assignor_budget.rs; issue 28 item 2) with real plugin files:
//! a budgeted `range` is the same assignor to the conformance suite; the `slow` fixture
//! (tests/fixtures/slow-assignor) past its budget is abandoned, marked slow and then
//! refused at once until its call returns; the `stuck` fixture (never returns) costs one
//! budget and then nothing.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use drover_abi::{
    assignor::AssignorArc,
    std_types::{RNone, RString, RVec},
    AssignInput, AssignorMember, ErrorKind, PluginKind, TopicInfo,
};
use drover_host::{
    coordination::assignor_budget::AssignorBudgets, metrics::Metrics, plugins::AssignorHandle,
};
use drover_plugin_testkit::assignor;
use drover_tests::{load_assignor, PluginDir};

fn started(lib: &str, config: &str) -> Arc<AssignorHandle> {
    let dir = PluginDir::new();
    let path = dir.add_built(lib);
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Assignor))
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(
        plugin
            .new_assignor(config)
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

fn budgeted(budgets: &AssignorBudgets, name: &str, handle: &Arc<AssignorHandle>) -> AssignorArc {
    let named = budgets.named(&BTreeMap::from([(name.to_owned(), Arc::clone(handle))]));
    named[0].assignor.clone()
}

fn input(group: &str) -> AssignInput {
    AssignInput {
        group: group.into(),
        members: vec![AssignorMember {
            member_id: RString::from("m1"),
            topics: vec![RString::from("t")].into(),
            owned: RVec::new(),
            rack: RNone,
            weight: 1,
        }]
        .into(),
        topics: vec![TopicInfo::new("t", 3)].into(),
    }
}

#[test]
fn a_budgeted_assignor_passes_the_assignor_suite() {
    let (_, range) = load_assignor("drover_assignor_range");
    let budgets = AssignorBudgets::new(10_000, Arc::new(Metrics::new()));
    let wrapped = budgeted(&budgets, "range", &Arc::new(range));
    let report = assignor::run(&wrapped, &assignor::Options::default());
    assert!(report.passed(), "{report}");
    assert!(budgets.slow("range").is_none());
}

#[test]
fn the_slow_fixture_past_its_budget_is_abandoned_and_slow_until_it_returns() {
    let slow = started("drover_fixture_slow_assignor", "sleep_ms = 600");
    let budgets = AssignorBudgets::new(100, Arc::new(Metrics::new()));
    let a = budgeted(&budgets, "slow", &slow);
    let t = Instant::now();
    let e = a.assign(&input("g1")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e:?}");
    assert!(
        t.elapsed() < Duration::from_millis(600),
        "waited the budget only"
    );
    let report = budgets.slow("slow").expect("marked slow");
    assert_eq!(report.oldest_group, "g1");
    // Refused at once while the abandoned call runs.
    let t = Instant::now();
    let e = a.assign(&input("g2")).unwrap_err();
    assert!(e.message.contains("is slow"), "{e:?}");
    assert!(t.elapsed() < Duration::from_millis(100));
    // Once it returned, the plugin is no longer slow; a call within budget would
    // answer, but this one sleeps 600 ms again: abandoned again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while budgets.slow("slow").is_some() {
        assert!(Instant::now() < deadline, "the slow call never returned");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(a.assign(&input("g3")).is_err());
    // A rescan that hands the same instance keeps its state (still slow).
    let again = budgeted(&budgets, "slow", &slow);
    assert!(budgets.slow("slow").is_some());
    assert!(again
        .assign(&input("g4"))
        .unwrap_err()
        .message
        .contains("is slow"));
}

#[test]
fn the_slow_fixture_within_its_budget_answers() {
    let slow = started("drover_fixture_slow_assignor", "sleep_ms = 0");
    let budgets = AssignorBudgets::new(5_000, Arc::new(Metrics::new()));
    let a = budgeted(&budgets, "slow", &slow);
    let out = a.assign(&input("g")).unwrap();
    assert_eq!(
        out.members[0].partitions[0].partitions.as_slice(),
        &[0, 1, 2]
    );
}

#[test]
fn the_stuck_fixture_costs_one_budget_then_nothing() {
    let stuck = started("drover_fixture_stuck_assignor", "");
    let budgets = AssignorBudgets::new(100, Arc::new(Metrics::new()));
    let a = budgeted(&budgets, "stuck", &stuck);
    assert!(a.assign(&input("g1")).is_err());
    let t = Instant::now();
    for i in 0..100 {
        assert!(a.assign(&input(&format!("g{i}"))).is_err());
    }
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    let report = budgets.slow("stuck").expect("slow");
    assert_eq!((report.overdue, report.oldest_group.as_str()), (1, "g1"));
}
