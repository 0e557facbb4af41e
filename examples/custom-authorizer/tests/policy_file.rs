//! The example authorizer in-process: its rules, the conformance suite, and reloading.

use std::time::{Duration, Instant};

use drover_abi::{
    authorizer::{AclOperation as Op, Action, AuthorizerArc, PatternType, ResourceType},
    sdk::in_process,
    std_types::RSlice,
    ErrorKind,
};
use drover_example_policy_authorizer::{Policy, PolicyFile};
use drover_plugin_testkit::authorizer::{action, context, run, Options};

const POLICY: &str = "
super  User:admin
label  topic  orders-*   sales     # every topic named orders-...
label  group  billing    sales
label  topic  public-*   public
grant  User:alice  sales   read,write
grant  User:*      public  read
deny   User:bob    public  all
";

fn allows(policy: &Policy, who: &str, rt: ResourceType, name: &str, op: Op) -> bool {
    policy.allows(who, &action(rt, name, op))
}

#[test]
fn grants_labels_implications_and_denies() {
    let p = Policy::parse(POLICY).unwrap();
    let topic = ResourceType::Topic;
    assert!(allows(&p, "User:alice", topic, "orders-eu", Op::Write));
    assert!(
        allows(&p, "User:alice", topic, "orders-eu", Op::Describe),
        "write implies describe"
    );
    assert!(!allows(&p, "User:alice", topic, "orders-eu", Op::Delete));
    assert!(
        !allows(&p, "User:alice", topic, "orders", Op::Read),
        "the prefix is `orders-`"
    );
    assert!(allows(
        &p,
        "User:alice",
        ResourceType::Group,
        "billing",
        Op::Read
    ));
    assert!(
        !allows(&p, "User:alice", ResourceType::Group, "billing-2", Op::Read),
        "literal"
    );
    assert!(
        allows(&p, "User:carol", topic, "public-news", Op::Read),
        "User:* is everyone"
    );
    assert!(
        !allows(&p, "User:bob", topic, "public-news", Op::Read),
        "a deny wins"
    );
    assert!(allows(
        &p,
        "User:admin",
        ResourceType::Cluster,
        "kafka-cluster",
        Op::Alter
    ));
    assert!(!allows(
        &p,
        "User:alice",
        topic,
        "orders-eu",
        Op::from_code(42)
    ));
    let prefixed = Action {
        pattern_type: PatternType::Prefixed,
        ..action(topic, "orders-eu", Op::Read)
    };
    assert!(!p.allows("User:alice", &prefixed));
}

#[test]
fn a_line_it_cannot_read_is_named() {
    let err = Policy::parse("super User:admin\ngrant User:a sales read,fly\n").unwrap_err();
    assert_eq!(err, "line 2: cannot read `grant User:a sales read,fly`");
    assert!(
        Policy::parse("label queue x y").is_err(),
        "not a resource type"
    );
}

fn policy_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy");
    std::fs::write(&path, text).unwrap();
    let config = format!("policy = {:?}", path.display().to_string());
    (dir, config)
}

#[test]
fn passes_the_testkit_suite() {
    let (_dir, config) = policy_file(POLICY);
    let instance = in_process::authorizer::<PolicyFile>(&config).unwrap();
    run(&instance, &Options::default().super_user("User:admin")).assert_passed();
}

#[test]
fn a_bad_config_or_policy_is_invalid_config() {
    for config in ["", "file = \"/x\"", "policy = \"/nonexistent/policy\""] {
        let err = in_process::authorizer::<PolicyFile>(config).err().unwrap();
        assert_eq!(err.kind, ErrorKind::InvalidConfig, "{config}: {err}");
    }
    let (_dir, config) = policy_file("grant User:a");
    let err = in_process::authorizer::<PolicyFile>(&config).err().unwrap();
    assert!(err.message.contains("line 1"), "{err}");
}

fn alice_reads(authz: &AuthorizerArc, topic: &str) -> bool {
    let read = [action(ResourceType::Topic, topic, Op::Read)];
    let decisions = authz
        .authorize(&context("User:alice"), RSlice::from_slice(&read))
        .unwrap();
    decisions[0].is_allowed()
}

/// Waits up to 10 s for `done`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_changed_file_is_the_policy_from_the_next_request_and_a_broken_one_is_ignored() {
    let (dir, config) = policy_file(POLICY);
    let authz = in_process::authorizer::<PolicyFile>(&config).unwrap();
    assert!(alice_reads(&authz, "orders-eu"));
    assert!(!alice_reads(&authz, "invoices"));

    let path = dir.path().join("policy");
    let moved = POLICY.replace("orders-*", "invoices");
    std::fs::write(&path, &moved).unwrap();
    eventually("the new policy applies", || alice_reads(&authz, "invoices"));
    assert!(!alice_reads(&authz, "orders-eu"));

    std::fs::write(&path, "grant User:alice\n").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(alice_reads(&authz, "invoices"), "the previous policy stays");
}
