use abi_stable::std_types::{ROption, RString, RVec};

use crate::{AssignInput, AssignorMember, ErrorKind, TopicInfo, TopicPartitions};

use super::GroupView;

fn member(id: &str, topics: &[&str]) -> AssignorMember {
    AssignorMember {
        member_id: id.into(),
        topics: topics.iter().map(|&t| RString::from(t)).collect(),
        owned: RVec::new(),
        rack: ROption::RNone,
        weight: 1,
    }
}

fn input(members: Vec<AssignorMember>, topics: &[(&str, u32)]) -> AssignInput {
    AssignInput {
        group: "g".into(),
        members: RVec::from(members),
        topics: topics.iter().map(|&(n, p)| TopicInfo::new(n, p)).collect(),
    }
}

#[test]
fn members_are_sorted_and_topics_indexed() {
    let input = input(
        vec![member("b", &["y", "x"]), member("a", &["x"])],
        &[("y", 2), ("x", 3)],
    );
    let view = GroupView::new(&input).unwrap();
    let ids: Vec<&str> = view.members().iter().map(|m| m.id).collect();
    assert_eq!(ids, ["a", "b"]);
    let names: Vec<&str> = view.topics().iter().map(|t| t.name).collect();
    assert_eq!(names, ["x", "y"]);
    assert_eq!(view.topics()[0].first, 0);
    assert_eq!(view.topics()[1].first, 3);
    assert_eq!(view.partition_count(), 5);
    assert_eq!(view.members()[0].topics, [0]);
    assert_eq!(view.members()[1].topics, [0, 1]);
    assert_eq!(view.topics()[0].subscribers, [0, 1]);
    assert_eq!(view.topics()[1].subscribers, [1]);
    assert!(!view.is_homogeneous());
    assert_eq!(view.topic_of(2), 0);
    assert_eq!(view.topic_of(3), 1);
    assert_eq!(view.topic_of(4), 1);
}

#[test]
fn unknown_empty_and_unsubscribed_topics_are_left_out() {
    let input = input(
        vec![
            member("a", &["x", "missing", "empty", "x"]),
            member("b", &["x", "empty"]),
        ],
        &[("x", 2), ("empty", 0), ("nobody", 7)],
    );
    let view = GroupView::new(&input).unwrap();
    let names: Vec<&str> = view.topics().iter().map(|t| t.name).collect();
    assert_eq!(names, ["x"]);
    assert_eq!(view.members()[0].topics, [0]);
    assert!(view.is_homogeneous());
    assert_eq!(view.partition_count(), 2);
    assert_eq!(view.topic_index("x"), Some(0));
    assert_eq!(view.topic_index("nobody"), None);
    assert_eq!(view.topic_index("missing"), None);
}

#[test]
fn empty_group_is_valid() {
    let input = input(vec![], &[("x", 2)]);
    let view = GroupView::new(&input).unwrap();
    assert!(view.members().is_empty());
    assert_eq!(view.partition_count(), 0);
    assert!(view.is_homogeneous());
}

#[test]
fn duplicate_member_id_is_invalid_input() {
    let input = input(vec![member("a", &["x"]), member("a", &[])], &[("x", 1)]);
    let err = GroupView::new(&input).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(err.message.contains("`a`"), "{err}");
}

#[test]
fn duplicate_topic_is_invalid_input() {
    let input = input(vec![member("a", &["x"])], &[("x", 1), ("x", 1)]);
    assert_eq!(
        GroupView::new(&input).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
}

#[test]
fn oversized_partition_counts_are_invalid_input() {
    let one = input(vec![member("a", &["x"])], &[("x", i32::MAX as u32 + 1)]);
    assert_eq!(
        GroupView::new(&one).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
    let many = input(
        vec![member("a", &["x", "y", "z"])],
        &[("x", i32::MAX as u32), ("y", i32::MAX as u32), ("z", 2)],
    );
    assert_eq!(
        GroupView::new(&many).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
}

#[test]
fn owned_partitions_keep_only_valid_ones() {
    let mut a = member("a", &["x", "y"]);
    a.owned = RVec::from(vec![
        TopicPartitions::new("y", vec![1, 0, 1]),
        TopicPartitions::new("x", vec![-1, 2, 3]),
        TopicPartitions::new("z", vec![0]),
        TopicPartitions::new("missing", vec![0]),
    ]);
    let input = input(
        vec![a, member("b", &["z"])],
        &[("x", 3), ("y", 2), ("z", 1)],
    );
    let view = GroupView::new(&input).unwrap();
    let mut out = vec![99];
    view.owned_partitions(0, &mut out);
    // x: 0..3 → ids 0..3, y: 3..5; x/2 → 2, y/0 → 3, y/1 → 4.
    assert_eq!(out, [2, 3, 4]);
    view.owned_partitions(1, &mut out);
    assert!(out.is_empty());
}

/// Issue 28 item 5: a member's rack and weight without reaching into the ABI struct.
#[test]
fn a_members_rack_and_weight_are_read_from_the_view() {
    let mut racked = member("a", &["x"]);
    racked.rack = ROption::RSome("eu-1a".into());
    racked.weight = 3;
    let mut zero = member("b", &["x"]);
    zero.weight = 0;
    let input = input(vec![racked, zero], &[("x", 2)]);
    let view = GroupView::new(&input).unwrap();
    let read: Vec<(Option<&str>, u32)> = view
        .members()
        .iter()
        .map(|m| (m.rack(), m.weight()))
        .collect();
    assert_eq!(read, [(Some("eu-1a"), 3), (None, 1)]);
}
