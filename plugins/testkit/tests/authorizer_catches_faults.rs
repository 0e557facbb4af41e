//! The authorizer suite against an in-memory ACL authorizer, in-process: correct, it
//! passes every property; with each fault its config can give it, the suite fails the
//! property that fault breaks and names it. (One plugin per test binary: two plugin
//! crates linked together would export the same library-header symbol.)

use drover_abi::sdk::in_process;
use drover_fixture_faulty_authorizer::Faulty;
use drover_plugin_testkit::{
    authorizer::{run, Options},
    Report, Verdict,
};

fn suite(fault: &str, options: Options) -> Report {
    let config = format!("fault = \"{fault}\"\nsuper_user = \"User:admin\"\n");
    let instance = in_process::authorizer::<Faulty>(&config).unwrap();
    run(&instance, &options.cases(16))
}

fn failed(report: &Report) -> Vec<&'static str> {
    report.failures().map(|o| o.property).collect()
}

#[test]
fn a_correct_authorizer_passes_every_property() {
    let report = suite("none", Options::default().super_user("User:admin"));
    report.assert_passed();
    assert!(
        report.outcomes.iter().all(|o| o.verdict == Verdict::Pass),
        "nothing skipped: {report}"
    );
}

#[test]
fn without_a_super_user_its_property_is_skipped() {
    let report = suite("none", Options::default());
    assert!(report.passed(), "{report}");
    let Some(Verdict::Skip(why)) = report.verdict("super_user") else {
        panic!("{report}")
    };
    assert!(why.contains("--super-user"), "{why}");
}

#[test]
fn too_few_decisions_fail_one_decision_per_action() {
    let report = suite("too_few", Options::default().super_user("User:admin"));
    let Some(Verdict::Fail(why)) = report.verdict("one_decision_per_action") else {
        panic!("{report}")
    };
    assert_eq!(
        why, "authorize answered 0 decisions for 1 actions",
        "{report}"
    );
    let message = report.panic_message();
    assert!(
        message.starts_with("authorizer conformance suite: ")
            && message
                .lines()
                .next()
                .unwrap()
                .contains("one_decision_per_action"),
        "{message}"
    );
}

#[test]
fn each_fault_fails_the_property_it_breaks() {
    for (fault, property, why) in [
        ("reversed", "in_order", "asked alone but"),
        ("flaky", "deterministic", "asked twice"),
        ("allow_unknown", "denies_unknown_codes", "(an unknown code)"),
        (
            "no_super_user",
            "super_user",
            "super user User:admin was denied",
        ),
        (
            "allow_wins",
            "deny_beats_allow",
            "is ALLOWED after creating DENY",
        ),
        ("forgetful", "acl_round_trip", "returned []"),
    ] {
        let report = suite(fault, Options::default().super_user("User:admin"));
        let failed = failed(&report);
        assert!(failed.contains(&property), "{fault}: {report}");
        let Some(Verdict::Fail(text)) = report.verdict(property) else {
            unreachable!()
        };
        assert!(text.contains(why), "{fault}: {text}");
        assert_eq!(
            report.verdict("one_decision_per_action"),
            Some(&Verdict::Pass),
            "{fault}: {report}"
        );
    }
}
