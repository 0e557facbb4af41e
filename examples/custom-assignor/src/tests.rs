use drover_abi::{
    sdk::in_process,
    std_types::{RNone, RString, RVec},
    AssignorMember, ErrorKind, TopicInfo,
};
use drover_plugin_testkit::assignor::{run, Claim, Claims, Options};

use super::*;

fn member(id: &str, weight: u32) -> AssignorMember {
    AssignorMember {
        member_id: id.into(),
        topics: RVec::from(vec![RString::from("t")]),
        owned: RVec::new(),
        rack: RNone,
        weight,
    }
}

fn input(members: Vec<AssignorMember>, topics: Vec<TopicInfo>) -> AssignInput {
    AssignInput {
        group: "g".into(),
        members: RVec::from(members),
        topics: RVec::from(topics),
    }
}

#[test]
fn heavier_members_get_proportionally_more() {
    let input = input(
        vec![member("a", 1), member("b", 3)],
        vec![TopicInfo::new("t", 8)],
    );
    let out = Weighted.assign(&input).unwrap();
    let counts: Vec<usize> = out
        .members
        .iter()
        .map(|m| m.partitions.iter().map(|tp| tp.partitions.len()).sum())
        .collect();
    assert_eq!(counts, vec![2, 6]);
}

#[test]
fn a_topic_listed_twice_is_refused() {
    let input = input(
        vec![member("a", 1)],
        vec![TopicInfo::new("t", 2), TopicInfo::new("t", 4)],
    );
    assert_eq!(
        Weighted.assign(&input).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
}

/// The test kit's assignor suite against the plugin type, in-process: the contract,
/// determinism, and balance (with equal weights), which this policy claims.
#[test]
fn passes_the_testkit_suite() {
    let instance = in_process::assignor::<Weighted>("").unwrap();
    let claims = Claims::none().with(Claim::Balanced);
    run(&instance, &Options::new(claims)).assert_passed();
}

/// Weights 1, 1, 2 over 8 partitions: 2, 2 and 4 — the declared weights, which the
/// coordinator now passes from RegisterConsumer v1, decide the split.
#[test]
fn weights_one_one_two_split_two_two_four() {
    let input = input(
        vec![member("a", 1), member("b", 1), member("c", 2)],
        vec![TopicInfo::new("t", 8)],
    );
    let out = Weighted.assign(&input).unwrap();
    let counts: Vec<(String, usize)> = out
        .members
        .iter()
        .map(|m| {
            let n = m.partitions.iter().map(|tp| tp.partitions.len()).sum();
            (m.member_id.to_string(), n)
        })
        .collect();
    assert_eq!(
        counts,
        vec![("a".into(), 2), ("b".into(), 2), ("c".into(), 4)]
    );
}
