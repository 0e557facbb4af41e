use abi_stable::std_types::{ROption, RString, RVec};

use crate::{
    sdk::assignor::{GroupView, NO_OWNER},
    AssignInput, AssignorMember, ErrorKind, TopicInfo, TopicPartitions,
};

fn member(id: &str, topics: &[&str]) -> AssignorMember {
    AssignorMember {
        member_id: id.into(),
        topics: topics.iter().map(|&t| RString::from(t)).collect(),
        owned: RVec::new(),
        rack: ROption::RNone,
        weight: 1,
    }
}

fn input() -> AssignInput {
    AssignInput {
        group: "g".into(),
        members: RVec::from(vec![
            member("c", &[]),
            member("b", &["y", "x"]),
            member("a", &["x"]),
        ]),
        topics: RVec::from(vec![TopicInfo::new("y", 2), TopicInfo::new("x", 3)]),
    }
}

#[test]
fn output_is_grouped_and_sorted() {
    let input = input();
    let view = GroupView::new(&input).unwrap();
    // ids: x/0 x/1 x/2 y/0 y/1; members: a=0 b=1 c=2.
    let assignment = view.build(&[1, 0, 1, 1, 1]).unwrap();
    let got: Vec<(&str, Vec<TopicPartitions>)> = assignment
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), m.partitions.to_vec()))
        .collect();
    assert_eq!(
        got,
        [
            ("a", vec![TopicPartitions::new("x", vec![1])]),
            (
                "b",
                vec![
                    TopicPartitions::new("x", vec![0, 2]),
                    TopicPartitions::new("y", vec![0, 1]),
                ]
            ),
            ("c", vec![]),
        ]
    );
}

#[test]
fn incomplete_owner_table_is_internal_error() {
    let input = input();
    let view = GroupView::new(&input).unwrap();
    let short = view.build(&[0, 0]).unwrap_err();
    assert_eq!(short.kind, ErrorKind::Internal);
    let hole = view.build(&[1, 0, 1, NO_OWNER, 1]).unwrap_err();
    assert_eq!(hole.kind, ErrorKind::Internal);
    assert!(hole.message.contains("partition 0 of topic `y`"), "{hole}");
    let stranger = view.build(&[1, 0, 1, 3, 1]).unwrap_err();
    assert_eq!(stranger.kind, ErrorKind::Internal);
}

#[test]
fn a_share_holder_table_gives_partitions_to_several_members_sorted() {
    let input = input();
    let view = GroupView::new(&input).unwrap();
    // ids: x/0 x/1 x/2 y/0 y/1; members: a=0 b=1 c=2. x/0 to both a and b (b named
    // twice counts once).
    let holders = vec![vec![1, 0, 1], vec![0], vec![1], vec![1], vec![1]];
    let assignment = view.build_share(&holders).unwrap();
    let got: Vec<(&str, Vec<TopicPartitions>)> = assignment
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), m.partitions.to_vec()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", vec![TopicPartitions::new("x", vec![0, 1])]),
            (
                "b",
                vec![
                    TopicPartitions::new("x", vec![0, 2]),
                    TopicPartitions::new("y", vec![0, 1])
                ]
            ),
            ("c", vec![]),
        ]
    );
    // A partition without a holder, a wrong length, an index past the members: bugs.
    let mut empty = holders.clone();
    empty[4].clear();
    assert_eq!(
        view.build_share(&empty).unwrap_err().kind,
        ErrorKind::Internal
    );
    assert_eq!(
        view.build_share(&holders[..4]).unwrap_err().kind,
        ErrorKind::Internal
    );
    let mut stranger = holders;
    stranger[2].push(3);
    assert_eq!(
        view.build_share(&stranger).unwrap_err().kind,
        ErrorKind::Internal
    );
}
