//! The assignor conformance suite (`drover-plugin-testkit`) against every built
//! assignor plugin and the example custom assignor, through its loaded `.so`, each
//! with the claims its docs make: `range` none (it balances per topic only),
//! `round-robin` balanced, `sticky` and `load-aware` (with nothing measured it
//! balances by count) balanced and sticky, `weighted` balanced (with
//! equal weights). Then what is specific to one plugin: `range` and `round-robin`
//! follow Kafka's rules exactly, over the test kit's generated groups.

use std::sync::OnceLock;

use drover_abi::{AssignInput, AssignorMember, TopicInfo};
use drover_host::plugins::AssignorHandle;
use drover_plugin_testkit::assignor::{
    self, builders::holders, contract::check_rules, generate::group, Claim, Claims, Options,
};
use drover_tests::{load_assignor, ASSIGNORS};
use proptest::prelude::*;

/// Every assignor under test: the built plugins and the example, loaded once per test
/// binary.
fn all() -> &'static [(&'static str, AssignorHandle)] {
    static ALL: OnceLock<Vec<(&'static str, AssignorHandle)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<_> = ASSIGNORS
            .iter()
            .map(|(lib, name)| (*name, load_assignor(lib).1))
            .collect();
        v.push((
            "weighted",
            load_assignor("drover_example_weighted_assignor").1,
        ));
        v
    })
}

fn handle(name: &str) -> &'static AssignorHandle {
    &all().iter().find(|(n, _)| *n == name).unwrap().1
}

/// What each assignor's docs promise beyond the contract.
fn claims(name: &str) -> Claims {
    match name {
        "round-robin" | "weighted" => Claims::none().with(Claim::Balanced),
        "sticky" | "load-aware" => Claims::none().with(Claim::Balanced).with(Claim::Sticky),
        _ => Claims::none(),
    }
}

#[test]
fn every_assignor_passes_the_testkit_suite() {
    for (name, assignor) in all() {
        let report = assignor::run(&assignor.instance(), &Options::new(claims(name)));
        assert!(report.passed(), "{name}:\n{report}");
    }
}

/// No built-in assignor serves share groups (assignor ABI 3.3): share groups run the
/// coordinator's `simple` unless a share assignor plugin is selected.
#[test]
fn the_built_in_assignors_decline_share_groups() {
    for (name, handle) in all() {
        assert!(!handle.instance().share_groups_supported(), "{name}");
    }
}

/// A share assignor through its loaded `.so` (the `recorder` fixture, which serves share
/// groups): the share suite of the test kit — every subscribed partition to at least one
/// subscriber, only subscribed topics, sorted, deterministic.
#[test]
fn a_share_assignor_passes_the_share_suite_through_its_so() {
    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        "path = {:?}",
        tmp.path().join("rec.json").display().to_string()
    );
    let dir = drover_tests::PluginDir::new();
    let path = dir.add_built("drover_fixture_recording_assignor");
    let plugin = dir
        .loader()
        .load(&path, Some(drover_abi::PluginKind::Assignor))
        .unwrap_or_else(|e| panic!("{e}"));
    let handle = plugin
        .new_assignor(&config)
        .unwrap_or_else(|e| panic!("{e}"));
    let instance = handle.instance();
    assert!(instance.share_groups_supported());
    let report = drover_plugin_testkit::assignor::share::run(
        &instance,
        &drover_plugin_testkit::assignor::Options::default(),
    );
    assert!(report.passed(), "{report}");
    // What it recorded of its last call says it was a share group's.
    let doc = std::fs::read_to_string(tmp.path().join("rec.json")).unwrap();
    assert!(doc.contains("\"share\":true"), "{doc}");
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// `name`'s assignment of `input`, checked against the contract's rules; partition
/// → member.
fn assign(
    name: &str,
    input: &AssignInput,
) -> Result<std::collections::BTreeMap<(String, i32), String>, TestCaseError> {
    let out = handle(name)
        .assign(input)
        .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
    check_rules(input, &out).map_err(TestCaseError::fail)?;
    Ok(holders(&out))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn range_follows_kafkas_per_topic_rule(input in group()) {
        let owner = assign("range", &input)?;
        for t in input.topics.iter() {
            let mut subs: Vec<&str> = input
                .members
                .iter()
                .filter(|m| m.topics.iter().any(|x| x == &t.name))
                .map(|m| m.member_id.as_str())
                .collect();
            subs.sort();
            if subs.is_empty() {
                continue;
            }
            let (n, m) = (t.partitions as usize, subs.len());
            let mut next = 0;
            for (i, id) in subs.iter().enumerate() {
                let len = n / m + usize::from(i < n % m);
                for p in next..next + len {
                    prop_assert_eq!(&owner[&(t.name.to_string(), p as i32)], id);
                }
                next += len;
            }
        }
    }

    #[test]
    fn round_robin_follows_kafkas_circular_rule(input in group()) {
        let owner = assign("round-robin", &input)?;
        let mut members: Vec<&AssignorMember> = input.members.iter().collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let mut topics: Vec<&TopicInfo> = input.topics.iter().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let mut cursor = 0;
        for t in topics {
            if !members.iter().any(|m| m.topics.contains(&t.name)) {
                continue;
            }
            for p in 0..t.partitions as i32 {
                while !members[cursor % members.len()].topics.contains(&t.name) {
                    cursor += 1;
                }
                let expected = members[cursor % members.len()].member_id.as_str();
                prop_assert_eq!(owner[&(t.name.to_string(), p)].as_str(), expected);
                cursor += 1;
            }
        }
    }
}
