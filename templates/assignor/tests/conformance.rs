//! The conformance suite Drover's own assignors pass, against this plugin in-process
//! (no `.so` needed). On success `cargo test` prints the suite's PASS and SKIP lines;
//! a failure names the failed properties.

use drover_abi::{
    assignor::context::empty_context, sdk::in_process, types::TopicInfo, AssignInput,
    AssignorMember,
};
use drover_plugin_testkit::assignor::{run, share, Claim, Claims, Options};
use my_assignor::MyAssignor;

#[test]
fn passes_the_conformance_suite() {
    let instance = in_process::assignor::<MyAssignor>("").unwrap();
    // Claim what the policy promises beyond the contract: `Balanced`, `Sticky`.
    let claims = Claims::none().with(Claim::Balanced);
    run(&instance, &Options::new(claims)).assert_passed();
}

#[test]
fn passes_the_share_assignor_suite() {
    // Share groups (assignor ABI 3.3): every subscribed partition to at least one
    // subscriber, only subscribed topics, deterministic.
    let instance = in_process::assignor::<MyAssignor>("").unwrap();
    share::run(&instance, &Options::default()).assert_passed();
}

#[test]
fn four_share_members_on_two_partitions_each_get_one() {
    let member = |id: &str| AssignorMember {
        member_id: id.into(),
        topics: vec!["orders".into()].into(),
        owned: Default::default(),
        rack: None.into(),
        weight: 1,
    };
    let input = AssignInput {
        group: "billing".into(),
        members: vec![member("d"), member("c"), member("b"), member("a")].into(),
        topics: vec![TopicInfo::new("orders", 2)].into(),
    };
    let instance = in_process::assignor::<MyAssignor>("").unwrap();
    let out = empty_context(|c| instance.assign_share(&input, c))
        .into_result()
        .unwrap();
    let got: Vec<(String, Vec<i32>)> = out
        .members
        .iter()
        .map(|m| {
            let partitions = m.partitions.iter().flat_map(|t| t.partitions.to_vec());
            (m.member_id.to_string(), partitions.collect())
        })
        .collect();
    let want = [("a", 0), ("b", 1), ("c", 0), ("d", 1)].map(|(m, p)| (m.to_owned(), vec![p]));
    assert_eq!(got, want);
}

#[test]
fn three_partitions_over_two_members() {
    let member = |id: &str| AssignorMember {
        member_id: id.into(),
        topics: vec!["orders".into()].into(),
        owned: Default::default(),
        rack: None.into(),
        weight: 1,
    };
    let input = AssignInput {
        group: "billing".into(),
        members: vec![member("b"), member("a")].into(),
        topics: vec![TopicInfo::new("orders", 3)].into(),
    };
    let instance = in_process::assignor::<MyAssignor>("").unwrap();
    let out = instance.assign(&input).into_result().unwrap();
    let got: Vec<(String, Vec<i32>)> = out
        .members
        .iter()
        .map(|m| {
            let partitions = m.partitions.iter().flat_map(|t| t.partitions.to_vec());
            (m.member_id.to_string(), partitions.collect())
        })
        .collect();
    assert_eq!(got, [("a".into(), vec![0, 2]), ("b".into(), vec![1])]);
}
