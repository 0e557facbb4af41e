//! The assignor suite against a deliberately broken assignor, in-process: it fails
//! exactly the property the bug breaks, and the report names it. (One plugin per test
//! binary: two plugin crates linked together would export the same library-header
//! symbol.)

use drover_abi::sdk::in_process;
use drover_fixture_double_assignor::Double;
use drover_plugin_testkit::{assignor, Verdict};

fn failed(report: &drover_plugin_testkit::Report) -> Vec<&'static str> {
    report.failures().map(|o| o.property).collect()
}

#[test]
fn an_assignor_giving_a_partition_twice_fails_contract() {
    let instance = in_process::assignor::<Double>("").unwrap();
    let report = assignor::run(&instance, &assignor::Options::default().cases(32));
    assert_eq!(
        failed(&report),
        ["contract", "context_contract"],
        "{report}"
    );
    let Some(Verdict::Fail(why)) = report.verdict("contract") else {
        panic!("{report}")
    };
    assert!(why.contains("given to"), "{why}");
    assert!(
        report.to_string().contains("FAIL contract: partition 0 of"),
        "{report}"
    );
    assert!(matches!(report.verdict("sticky"), Some(Verdict::Skip(_))));
    // What the author's `assert_passed` panics with: the failed checks named first.
    let message = report.panic_message();
    let summary = message.lines().next().unwrap_or_default();
    assert!(
        summary.starts_with("assignor conformance suite: ")
            && summary.contains(", 2 failed (contract, context_contract)"),
        "{message}"
    );
    assert!(
        message.contains("\n    FAIL contract: partition 0 of"),
        "{message}"
    );
}
