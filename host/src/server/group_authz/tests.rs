//! Unit tests of the group API checks, with the fake authorizer that allows names
//! starting with `ok`.
use kafka_protocol::{
    error::ResponseError,
    messages::{
        delete_groups_response::DeletableGroupResult,
        describe_groups_response::DescribedGroup as ClassicDescribed,
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
        offset_fetch_response::{
            OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
            OffsetFetchResponseTopic, OffsetFetchResponseTopics,
        },
        ConsumerGroupDescribeResponse, DeleteGroupsResponse, DescribeGroupsResponse, GroupId,
        JoinGroupRequest, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteResponse,
        OffsetFetchResponse, ShareGroupDescribeResponse, TopicName, TxnOffsetCommitResponse,
    },
    protocol::{Decodable, StrBytes},
};

use super::*;

fn checks() -> RequestAuthz {
    crate::authz::tests::ok_prefix_checks()
}

fn decoded(key: ApiKey, version: i16, body: RequestKind) -> Decoded {
    let mut header = RequestHeader::default();
    header.correlation_id = 9;
    Decoded {
        key,
        version,
        header,
        body,
    }
}

fn join(group: &str) -> Decoded {
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.into()));
    decoded(ApiKey::JoinGroup, 9, RequestKind::JoinGroup(r))
}

fn commit(group: &str, topics: &[&str]) -> Decoded {
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.into()));
    r.topics = topics
        .iter()
        .map(|t| {
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = TopicName(StrBytes::from_string((*t).into()));
            topic.partitions = vec![OffsetCommitRequestPartition::default()];
            topic
        })
        .collect();
    decoded(ApiKey::OffsetCommit, 9, RequestKind::OffsetCommit(r))
}

fn refused(check: GroupCheck) -> (ResponseKind, i16) {
    match check {
        GroupCheck::Refuse {
            response,
            error,
            correlation_id,
            ..
        } => {
            assert_eq!(correlation_id, 9);
            (*response, error)
        }
        GroupCheck::Forward | GroupCheck::Edit { .. } => panic!("forwarded"),
    }
}

#[test]
fn without_an_authorizer_everything_is_forwarded() {
    let none = RequestAuthz::allow_all();
    assert!(matches!(check(&none, join("g")), GroupCheck::Forward));
    assert!(matches!(
        check(&none, commit("g", &["t"])),
        GroupCheck::Forward
    ));
}

#[test]
fn a_join_without_read_on_the_group_is_answered_by_the_host() {
    assert!(matches!(
        check(&checks(), join("ok-g")),
        GroupCheck::Forward
    ));
    let (response, error) = refused(check(&checks(), join("g")));
    assert_eq!(error, GROUP_DENIED.code());
    let ResponseKind::JoinGroup(r) = response else {
        panic!("{response:?}")
    };
    assert_eq!((r.error_code, r.generation_id), (GROUP_DENIED.code(), -1));
}

/// The request handed on (`None`: the client's) and the edit of the answer.
fn edited(check: GroupCheck) -> (Option<Decoded>, AnswerEdit) {
    match check {
        GroupCheck::Edit { request, edit } => (request.map(|r| *r), edit),
        GroupCheck::Forward => panic!("forwarded unchanged"),
        GroupCheck::Refuse { response, .. } => panic!("refused: {response:?}"),
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn group(s: &str) -> GroupId {
    GroupId(StrBytes::from_string(s.into()))
}

/// The coordinator's OffsetCommit answer: each topic of `request`, every partition
/// with no error.
fn committed(request: &Decoded) -> ResponseKind {
    let RequestKind::OffsetCommit(r) = &request.body else {
        panic!("{request:?}")
    };
    let mut out = OffsetCommitResponse::default();
    out.throttle_time_ms = 7;
    out.topics = r
        .topics
        .iter()
        .map(|t| {
            let mut topic = OffsetCommitResponseTopic::default();
            topic.name = t.name.clone();
            topic.partitions = vec![OffsetCommitResponsePartition::default()];
            topic
        })
        .collect();
    out.into()
}

fn commit_codes(r: &OffsetCommitResponse) -> Vec<(&str, i16)> {
    r.topics
        .iter()
        .map(|t| (t.name.0.as_str(), t.partitions[0].error_code))
        .collect()
}

/// Kafka's `handleOffsetCommitRequest`: the allowed topics are committed by the
/// coordinator, the refused ones answered TOPIC_AUTHORIZATION_FAILED, first.
#[test]
fn a_commit_with_a_denied_topic_commits_the_allowed_ones() {
    assert!(matches!(
        check(&checks(), commit("ok-g", &["ok-a", "ok-b"])),
        GroupCheck::Forward
    ));
    let (request, edit) = edited(check(
        &checks(),
        commit("ok-g", &["ok-a", "secret", "ok-b"]),
    ));
    let request = request.expect("the allowed part is handed on");
    let RequestKind::OffsetCommit(r) = &request.body else {
        panic!("{request:?}")
    };
    let names: Vec<&str> = r.topics.iter().map(|t| t.name.0.as_str()).collect();
    assert_eq!(names, ["ok-a", "ok-b"]);
    assert_eq!((request.version, request.header.correlation_id), (9, 9));
    let mut answer = committed(&request);
    edit(&mut answer);
    let ResponseKind::OffsetCommit(a) = &answer else {
        panic!("{answer:?}")
    };
    assert_eq!(
        commit_codes(a),
        [("secret", TOPIC_DENIED.code()), ("ok-a", 0), ("ok-b", 0)]
    );
    assert_eq!(a.throttle_time_ms, 7, "the coordinator's answer is kept");
}

#[test]
fn a_commit_refused_whole_never_reaches_the_coordinator() {
    let codes = |d| {
        let (response, error) = refused(check(&checks(), d));
        let ResponseKind::OffsetCommit(r) = response else {
            panic!("{response:?}")
        };
        let codes: Vec<i16> = r
            .topics
            .iter()
            .map(|t| t.partitions[0].error_code)
            .collect();
        (codes, error)
    };
    assert_eq!(
        codes(commit("ok-g", &["secret", "other"])),
        (vec![TOPIC_DENIED.code(); 2], TOPIC_DENIED.code())
    );
    assert_eq!(
        codes(commit("g", &["ok-a"])),
        (vec![GROUP_DENIED.code()], GROUP_DENIED.code()),
        "the group's refusal covers every partition"
    );
}

#[test]
fn a_transactional_commit_commits_the_allowed_topics() {
    use kafka_protocol::messages::{
        txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic},
        TxnOffsetCommitRequest,
    };
    let txn = |id: &str, topics: &[&str]| {
        let mut r = TxnOffsetCommitRequest::default();
        r.transactional_id = StrBytes::from_string(id.into()).into();
        r.group_id = group("ok-g");
        r.topics = topics
            .iter()
            .map(|t| {
                let mut topic = TxnOffsetCommitRequestTopic::default();
                topic.name = name(t);
                topic.partitions = vec![TxnOffsetCommitRequestPartition::default()];
                topic
            })
            .collect();
        decoded(ApiKey::TxnOffsetCommit, 3, RequestKind::TxnOffsetCommit(r))
    };
    let (_, error) = refused(check(&checks(), txn("tx", &["ok-a"])));
    assert_eq!(
        error,
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    let (request, edit) = edited(check(&checks(), txn("ok-tx", &["secret", "ok-a"])));
    let RequestKind::TxnOffsetCommit(r) = request.expect("handed on").body else {
        panic!()
    };
    assert_eq!(r.topics.len(), 1);
    let mut answer: ResponseKind = TxnOffsetCommitResponse::default().into();
    edit(&mut answer);
    let ResponseKind::TxnOffsetCommit(a) = answer else {
        panic!()
    };
    assert_eq!(
        (
            a.topics[0].name.0.as_str(),
            a.topics[0].partitions[0].error_code
        ),
        ("secret", TOPIC_DENIED.code())
    );
}

#[test]
fn an_offset_delete_deletes_the_allowed_topics() {
    use kafka_protocol::messages::{
        offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic},
        OffsetDeleteRequest,
    };
    let mut r = OffsetDeleteRequest::default();
    r.group_id = group("ok-g");
    r.topics = ["ok-a", "secret"]
        .iter()
        .map(|t| {
            let mut topic = OffsetDeleteRequestTopic::default();
            topic.name = name(t);
            topic.partitions = vec![OffsetDeleteRequestPartition::default()];
            topic
        })
        .collect();
    let mut denied_group = r.clone();
    denied_group.group_id = group("g");
    let (response, _) = refused(check(
        &checks(),
        decoded(
            ApiKey::OffsetDelete,
            0,
            RequestKind::OffsetDelete(denied_group),
        ),
    ));
    let ResponseKind::OffsetDelete(a) = response else {
        panic!()
    };
    assert_eq!((a.error_code, a.topics.len()), (GROUP_DENIED.code(), 0));
    let (request, edit) = edited(check(
        &checks(),
        decoded(ApiKey::OffsetDelete, 0, RequestKind::OffsetDelete(r)),
    ));
    let RequestKind::OffsetDelete(r) = request.expect("handed on").body else {
        panic!()
    };
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].name.0.as_str(), "ok-a");
    let mut answer: ResponseKind = OffsetDeleteResponse::default().into();
    edit(&mut answer);
    let ResponseKind::OffsetDelete(a) = answer else {
        panic!()
    };
    assert_eq!(a.topics[0].partitions[0].error_code, TOPIC_DENIED.code());
}

fn fetch_v7(group_id: &str, topics: Option<&[&str]>) -> Decoded {
    use kafka_protocol::messages::{
        offset_fetch_request::OffsetFetchRequestTopic, OffsetFetchRequest,
    };
    let mut r = OffsetFetchRequest::default();
    r.group_id = group(group_id);
    r.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut topic = OffsetFetchRequestTopic::default();
                topic.name = name(t);
                topic.partition_indexes = vec![0];
                topic
            })
            .collect()
    });
    decoded(ApiKey::OffsetFetch, 7, RequestKind::OffsetFetch(r))
}

fn fetched_v7(names: &[&str]) -> ResponseKind {
    let mut out = OffsetFetchResponse::default();
    out.topics = names
        .iter()
        .map(|t| {
            let mut topic = OffsetFetchResponseTopic::default();
            topic.name = name(t);
            topic.partitions = vec![OffsetFetchResponsePartition::default()];
            topic
        })
        .collect();
    out.into()
}

fn fetch_codes(answer: &ResponseKind) -> Vec<(&str, i16)> {
    let ResponseKind::OffsetFetch(a) = answer else {
        panic!("{answer:?}")
    };
    a.topics
        .iter()
        .map(|t| (t.name.0.as_str(), t.partitions[0].error_code))
        .collect()
}

/// Kafka's `fetchOffsetsForGroup` (v1–7): the refused topics follow the coordinator's;
/// `fetchAllOffsetsForGroup`: only describable topics.
#[test]
fn an_offset_fetch_answers_the_allowed_topics_and_hides_the_others() {
    let (request, edit) = edited(check(
        &checks(),
        fetch_v7("ok-g", Some(&["secret", "ok-a"])),
    ));
    let RequestKind::OffsetFetch(r) = request.expect("handed on").body else {
        panic!()
    };
    assert_eq!(r.topics.as_ref().map(Vec::len), Some(1));
    let mut answer = fetched_v7(&["ok-a"]);
    edit(&mut answer);
    assert_eq!(
        fetch_codes(&answer),
        [("ok-a", 0), ("secret", TOPIC_DENIED.code())]
    );

    let (request, edit) = edited(check(&checks(), fetch_v7("ok-g", None)));
    assert!(
        request.is_none(),
        "a fetch of all offsets is handed on as is"
    );
    let mut answer = fetched_v7(&["ok-a", "secret", "ok-b"]);
    edit(&mut answer);
    assert_eq!(fetch_codes(&answer), [("ok-a", 0), ("ok-b", 0)]);

    let (_, error) = refused(check(&checks(), fetch_v7("g", Some(&["ok-a"]))));
    assert_eq!(error, GROUP_DENIED.code());
}

/// A group of an OffsetFetch v8+ answer: its id, error and (topic, partition 0's
/// error) pairs.
type FetchedGroup<'a> = (&'a str, i16, Vec<(&'a str, i16)>);

/// Kafka's `handleOffsetFetchRequestFromCoordinator` (v8+): every group in request
/// order, a refused group with GROUP_AUTHORIZATION_FAILED, a group whose named topics
/// are all refused answered by the host.
#[test]
fn a_multi_group_offset_fetch_merges_in_request_order() {
    use kafka_protocol::messages::{
        offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics},
        OffsetFetchRequest,
    };
    let mut r = OffsetFetchRequest::default();
    r.groups = [
        ("ok-1", Some(vec!["ok-a", "secret"])),
        ("g", None),
        ("ok-2", None),
        ("ok-3", Some(vec!["secret"])),
    ]
    .into_iter()
    .map(|(g, topics)| {
        let mut out = OffsetFetchRequestGroup::default();
        out.group_id = group(g);
        out.topics = topics.map(|ts| {
            ts.into_iter()
                .map(|t| {
                    let mut topic = OffsetFetchRequestTopics::default();
                    topic.name = name(t);
                    topic.partition_indexes = vec![0];
                    topic
                })
                .collect()
        });
        out
    })
    .collect();
    let (request, edit) = edited(check(
        &checks(),
        decoded(ApiKey::OffsetFetch, 9, RequestKind::OffsetFetch(r)),
    ));
    let RequestKind::OffsetFetch(r) = request.expect("handed on").body else {
        panic!()
    };
    let asked: Vec<&str> = r.groups.iter().map(|g| g.group_id.0.as_str()).collect();
    assert_eq!(asked, ["ok-1", "ok-2"]);
    // The coordinator answers in its own order.
    let mut answer = OffsetFetchResponse::default();
    answer.groups = [("ok-2", vec!["ok-b", "secret-b"]), ("ok-1", vec!["ok-a"])]
        .into_iter()
        .map(|(g, topics)| {
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = group(g);
            out.topics = topics
                .into_iter()
                .map(|t| {
                    let mut topic = OffsetFetchResponseTopics::default();
                    topic.name = name(t);
                    topic.partitions = vec![OffsetFetchResponsePartitions::default()];
                    topic
                })
                .collect();
            out
        })
        .collect();
    let mut answer: ResponseKind = answer.into();
    edit(&mut answer);
    let ResponseKind::OffsetFetch(a) = answer else {
        panic!()
    };
    let groups: Vec<FetchedGroup> = a
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.as_str(),
                g.error_code,
                g.topics
                    .iter()
                    .map(|t| (t.name.0.as_str(), t.partitions[0].error_code))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            (
                "ok-1",
                0,
                vec![("ok-a", 0), ("secret", TOPIC_DENIED.code())]
            ),
            ("g", GROUP_DENIED.code(), vec![]),
            ("ok-2", 0, vec![("ok-b", 0)]),
            ("ok-3", 0, vec![("secret", TOPIC_DENIED.code())]),
        ]
    );
}

fn describe_classic(version: i16, include: bool, groups: &[&str]) -> Decoded {
    let mut r = kafka_protocol::messages::DescribeGroupsRequest::default();
    r.groups = groups.iter().map(|g| group(g)).collect();
    r.include_authorized_operations = include;
    decoded(
        ApiKey::DescribeGroups,
        version,
        RequestKind::DescribeGroups(r),
    )
}

/// The coordinator's DescribeGroups answer: each requested group, no error, with the
/// coordinator's own (here: none) operations.
fn described(request: &Decoded) -> ResponseKind {
    let RequestKind::DescribeGroups(r) = &request.body else {
        panic!("{request:?}")
    };
    let mut out = DescribeGroupsResponse::default();
    out.groups = r
        .groups
        .iter()
        .map(|g| {
            let mut d = ClassicDescribed::default();
            d.group_id = g.clone();
            d.group_state = StrBytes::from_static_str("Stable");
            d.authorized_operations = 0;
            d
        })
        .collect();
    out.into()
}

/// Kafka's `handleDescribeGroupsRequest`: refused groups first, then the
/// coordinator's; KIP-430 operations (v3+, when asked) from the authorizer.
#[test]
fn describe_groups_describes_the_allowed_ones_with_the_authorizers_operations() {
    let every_group_op = crate::authz::operations_bits(
        crate::authz::supported_operations(ResourceType::Group)
            .iter()
            .copied(),
    );
    let (request, edit) = edited(check(
        &checks(),
        describe_classic(5, true, &["ok-a", "secret", "ok-b"]),
    ));
    let request = request.expect("handed on");
    let mut answer = described(&request);
    edit(&mut answer);
    let ResponseKind::DescribeGroups(a) = answer else {
        panic!()
    };
    let groups: Vec<(&str, i16, i32)> = a
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code, g.authorized_operations))
        .collect();
    assert_eq!(
        groups,
        [
            ("secret", GROUP_DENIED.code(), i32::MIN),
            ("ok-a", 0, every_group_op),
            ("ok-b", 0, every_group_op),
        ]
    );

    // All allowed and asked for operations: the client's frame, the answer edited.
    let d = describe_classic(5, true, &["ok-a"]);
    let (request, edit) = edited(check(&checks(), d.clone()));
    assert!(request.is_none());
    let mut answer = described(&d);
    edit(&mut answer);
    let ResponseKind::DescribeGroups(a) = answer else {
        panic!()
    };
    assert_eq!(a.groups[0].authorized_operations, every_group_op);
    // Not asked for, or before v3: unchanged.
    for d in [
        describe_classic(5, false, &["ok-a"]),
        describe_classic(2, true, &["ok-a"]),
    ] {
        assert!(matches!(check(&checks(), d), GroupCheck::Forward));
    }
    // Without an authorizer: unchanged.
    assert!(matches!(
        check(
            &RequestAuthz::allow_all(),
            describe_classic(5, true, &["ok-a"])
        ),
        GroupCheck::Forward
    ));
}

/// Kafka's `handleDeleteGroupsRequest`: the coordinator's results, then each refused
/// group once.
#[test]
fn delete_groups_deletes_the_allowed_ones() {
    let mut r = kafka_protocol::messages::DeleteGroupsRequest::default();
    r.groups_names = ["secret", "ok-a", "secret"]
        .iter()
        .map(|g| group(g))
        .collect();
    let (request, edit) = edited(check(
        &checks(),
        decoded(ApiKey::DeleteGroups, 2, RequestKind::DeleteGroups(r)),
    ));
    let RequestKind::DeleteGroups(r) = request.expect("handed on").body else {
        panic!()
    };
    assert_eq!(r.groups_names, [group("ok-a")]);
    let mut answer = DeleteGroupsResponse::default();
    let mut ok = DeletableGroupResult::default();
    ok.group_id = group("ok-a");
    answer.results = vec![ok];
    let mut answer: ResponseKind = answer.into();
    edit(&mut answer);
    let ResponseKind::DeleteGroups(a) = answer else {
        panic!()
    };
    let results: Vec<(&str, i16)> = a
        .results
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code))
        .collect();
    assert_eq!(results, [("ok-a", 0), ("secret", GROUP_DENIED.code())]);
}

/// The allowed part is re-encoded at the client's version and header, and the answer
/// edited through its bytes.
#[test]
fn the_allowed_part_is_encoded_at_the_clients_version() {
    let mut d = commit("ok-g", &["ok-a", "secret"]);
    d.header.client_id = Some(StrBytes::from_static_str("app"));
    d.header.request_api_key = ApiKey::OffsetCommit as i16;
    d.header.request_api_version = 8;
    d.version = 8;
    let (request, edit) = edited(check(&checks(), d));
    let request = request.expect("handed on");
    let frame = request.encode().expect("encodes");
    let again = decode(&frame).expect("decodes");
    assert_eq!((again.key, again.version), (ApiKey::OffsetCommit, 8));
    assert_eq!(again.header.client_id.as_deref(), Some("app"));
    assert_eq!(again.body, request.body);

    let answer =
        crate::server::dispatch::encode_response(ApiKey::OffsetCommit, 8, 9, &committed(&request))
            .expect("encodes");
    let merged = edit_answer(ApiKey::OffsetCommit, 8, answer, edit);
    let mut buf = merged;
    let header = kafka_protocol::messages::ResponseHeader::decode(
        &mut buf,
        ApiKey::OffsetCommit.response_header_version(8),
    )
    .expect("header");
    assert_eq!(header.correlation_id, 9);
    let a = OffsetCommitResponse::decode(&mut buf, 8).expect("body");
    assert_eq!(
        commit_codes(&a),
        [("secret", TOPIC_DENIED.code()), ("ok-a", 0)]
    );
}

/// KIP-932 (coordinator ABI 3.7): ShareGroupHeartbeat needs Read on the group,
/// ShareGroupDescribe Describe on each group, as Kafka's `KafkaApis`.
#[test]
fn share_group_requests_are_checked_on_their_groups() {
    let beat = |group: &str| {
        let mut r = kafka_protocol::messages::ShareGroupHeartbeatRequest::default();
        r.group_id = GroupId(StrBytes::from_string(group.into()));
        r.member_id = StrBytes::from_static_str("AAAAAAAAAAAAAAAAAAAAAA");
        decoded(
            ApiKey::ShareGroupHeartbeat,
            1,
            RequestKind::ShareGroupHeartbeat(r),
        )
    };
    assert!(matches!(
        check(&checks(), beat("ok-g")),
        GroupCheck::Forward
    ));
    let (response, error) = refused(check(&checks(), beat("g")));
    assert_eq!(error, GROUP_DENIED.code());
    let ResponseKind::ShareGroupHeartbeat(r) = response else {
        panic!("{response:?}")
    };
    assert_eq!(r.error_code, GROUP_DENIED.code());

    let describe = |groups: &[&str]| {
        let mut r = kafka_protocol::messages::ShareGroupDescribeRequest::default();
        r.group_ids = groups
            .iter()
            .map(|g| GroupId(StrBytes::from_string((*g).into())))
            .collect();
        decoded(
            ApiKey::ShareGroupDescribe,
            1,
            RequestKind::ShareGroupDescribe(r),
        )
    };
    assert!(matches!(
        check(&checks(), describe(&["ok-a", "ok-b"])),
        GroupCheck::Forward
    ));
    let (response, _) = refused(check(&checks(), describe(&["secret"])));
    let ResponseKind::ShareGroupDescribe(r) = response else {
        panic!("{response:?}")
    };
    assert_eq!(r.groups[0].error_code, GROUP_DENIED.code());
    let (request, edit) = edited(check(&checks(), describe(&["ok-a", "secret"])));
    let RequestKind::ShareGroupDescribe(r) = request.expect("handed on").body else {
        panic!()
    };
    assert_eq!(r.group_ids, [group("ok-a")]);
    let mut answer = ShareGroupDescribeResponse::default();
    let mut ok = kafka_protocol::messages::share_group_describe_response::DescribedGroup::default();
    ok.group_id = group("ok-a");
    answer.groups = vec![ok];
    let mut answer: ResponseKind = answer.into();
    edit(&mut answer);
    let ResponseKind::ShareGroupDescribe(a) = answer else {
        panic!()
    };
    let codes: Vec<(&str, i16)> = a
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code))
        .collect();
    assert_eq!(codes, [("secret", GROUP_DENIED.code()), ("ok-a", 0)]);
}

/// KAFKA-18813: a KIP-848 heartbeat naming a topic the principal may not describe is
/// answered TOPIC_AUTHORIZATION_FAILED by the host; a regex or no names is handed on.
#[test]
fn a_consumer_heartbeat_needs_describe_on_its_named_topics() {
    let beat = |names: Option<&[&str]>, regex: Option<&str>| {
        let mut r = kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default();
        r.group_id = group("ok-g");
        r.subscribed_topic_names = names.map(|ns| ns.iter().map(|t| name(t)).collect());
        r.subscribed_topic_regex = regex.map(|x| StrBytes::from_string(x.into()));
        decoded(
            ApiKey::ConsumerGroupHeartbeat,
            1,
            RequestKind::ConsumerGroupHeartbeat(r),
        )
    };
    for forwarded in [
        beat(Some(&["ok-a", "ok-b"]), None),
        beat(None, None),
        beat(Some(&[]), Some("secret.*")),
    ] {
        assert!(matches!(check(&checks(), forwarded), GroupCheck::Forward));
    }
    let (response, error) = refused(check(&checks(), beat(Some(&["ok-a", "secret"]), None)));
    assert_eq!(error, TOPIC_DENIED.code());
    let ResponseKind::ConsumerGroupHeartbeat(r) = response else {
        panic!("{response:?}")
    };
    assert_eq!(r.error_code, TOPIC_DENIED.code());
}

/// KAFKA-18813: ConsumerGroupDescribe hides a group whose assignments name a topic
/// the principal may not describe.
#[test]
fn consumer_group_describe_hides_groups_assigned_undescribable_topics() {
    use kafka_protocol::messages::consumer_group_describe_response::{
        DescribedGroup, Member, TopicPartitions,
    };
    let mut r = kafka_protocol::messages::ConsumerGroupDescribeRequest::default();
    r.group_ids = vec![group("ok-1"), group("ok-2")];
    let d = decoded(
        ApiKey::ConsumerGroupDescribe,
        0,
        RequestKind::ConsumerGroupDescribe(r),
    );
    let (request, edit) = edited(check(&checks(), d));
    assert!(request.is_none(), "every group allowed: the client's frame");
    let described = |id: &str, assigned: &str, target: &str| {
        let mut g = DescribedGroup::default();
        g.group_id = group(id);
        g.group_state = StrBytes::from_static_str("Stable");
        let mut m = Member::default();
        let topic = |n: &str| {
            let mut t = TopicPartitions::default();
            t.topic_name = name(n);
            t.partitions = vec![0];
            t
        };
        m.assignment.topic_partitions = vec![topic(assigned)];
        m.target_assignment.topic_partitions = vec![topic(target)];
        g.members = vec![m];
        g
    };
    let mut answer = ConsumerGroupDescribeResponse::default();
    answer.groups = vec![
        described("ok-1", "ok-a", "ok-b"),
        described("ok-2", "ok-a", "secret"),
    ];
    let mut answer: ResponseKind = answer.into();
    edit(&mut answer);
    let ResponseKind::ConsumerGroupDescribe(a) = answer else {
        panic!()
    };
    assert_eq!((a.groups[0].error_code, a.groups[0].members.len()), (0, 1));
    let hidden = &a.groups[1];
    assert_eq!(
        (
            hidden.group_id.0.as_str(),
            hidden.error_code,
            hidden.members.len()
        ),
        ("ok-2", TOPIC_DENIED.code(), 0)
    );
    assert_eq!(hidden.group_state.as_str(), "");
}
