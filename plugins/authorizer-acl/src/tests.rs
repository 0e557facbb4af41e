//! The authorizer through the SDK's in-process root module (`sdk::in_process::authorizer`,
//! the same root module the `.so` exports: panic guard, conversions), standalone with a
//! file in a temporary directory: decisions against hand cases and against a naive
//! reference model (proptest), ACL administration, the file across restarts.

use std::path::Path;

use drover_abi::{
    authorizer::{
        AccessControlEntry, AclBinding, AclBindingFilter, AclOperation as Op,
        AclPermission as Perm, Action, AuthorizerArc, PatternType as Pt, RequestContext,
        ResourcePattern, ResourceType as Rt,
    },
    sdk::in_process,
    std_types::{RNone, ROption, RSlice, RSome, RString},
    ErrorKind, PluginError,
};
use proptest::prelude::*;

use crate::AclAuthorizer;

fn open_in(dir: &Path, extra: &str) -> Result<AuthorizerArc, PluginError> {
    let path = dir.join("acls");
    in_process::authorizer::<AclAuthorizer>(&format!("path = {:?}\n{extra}", path))
}

fn open(dir: &Path, extra: &str) -> AuthorizerArc {
    open_in(dir, extra).expect("open")
}

/// An authorizer on a file in a new temporary directory (kept as long as the first).
fn fresh(extra: &str) -> (tempfile::TempDir, AuthorizerArc) {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), extra);
    (dir, a)
}

fn ctx(principal: &str, host: &str) -> RequestContext {
    RequestContext {
        principal: principal.into(),
        listener: "CLIENT".into(),
        security_protocol: "SASL_PLAINTEXT".into(),
        sasl_mechanism: RSome("SCRAM-SHA-512".into()),
        client_address: host.into(),
        client_id: "test".into(),
        api_key: 0,
        api_version: 9,
        correlation_id: 1,
    }
}

fn action(t: Rt, name: &str, op: Op) -> Action {
    Action {
        resource_type: t,
        resource_name: name.into(),
        pattern_type: Pt::Literal,
        operation: op,
        reference_count: 1,
        log_if_allowed: true,
        log_if_denied: true,
    }
}

fn acl(t: Rt, name: &str, pt: Pt, principal: &str, host: &str, op: Op, perm: Perm) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: t,
            name: name.into(),
            pattern_type: pt,
        },
        entry: AccessControlEntry {
            principal: principal.into(),
            host: host.into(),
            operation: op,
            permission: perm,
        },
    }
}

/// An ALLOW or DENY for `principal` from any host on a topic.
fn topic(name: &str, pt: Pt, principal: &str, op: Op, perm: Perm) -> AclBinding {
    acl(Rt::Topic, name, pt, principal, "*", op, perm)
}

fn any_filter() -> AclBindingFilter {
    AclBindingFilter {
        resource_type: Rt::Any,
        name: RNone,
        pattern_type: Pt::Any,
        principal: RNone,
        host: RNone,
        operation: Op::Any,
        permission: Perm::Any,
    }
}

fn allowed(a: &AuthorizerArc, principal: &str, host: &str, t: Rt, name: &str, op: Op) -> bool {
    let d = a
        .authorize(
            &ctx(principal, host),
            RSlice::from_slice(&[action(t, name, op)]),
        )
        .unwrap();
    assert_eq!(d.len(), 1);
    d[0].is_allowed()
}

fn alice_may(a: &AuthorizerArc, name: &str, op: Op) -> bool {
    allowed(a, "User:alice", "10.0.0.1", Rt::Topic, name, op)
}

fn create(a: &AuthorizerArc, bindings: Vec<AclBinding>) -> Vec<Option<PluginError>> {
    a.create_acls(bindings.into())
        .unwrap()
        .into_iter()
        .map(ROption::into_option)
        .collect()
}

fn create_ok(a: &AuthorizerArc, bindings: Vec<AclBinding>) {
    for (i, r) in create(a, bindings).into_iter().enumerate() {
        assert!(r.is_none(), "binding {i}: {r:?}");
    }
}

fn describe(a: &AuthorizerArc, filter: AclBindingFilter) -> Vec<AclBinding> {
    a.acls(&filter).unwrap().into_iter().collect()
}

fn any_of(a: &AuthorizerArc, principal: &str, t: Rt, op: Op) -> bool {
    a.authorize_any(&ctx(principal, "10.0.0.1"), t, op)
        .unwrap()
        .is_allowed()
}

#[test]
fn no_acl_denies_unless_allow_everyone() {
    let (_dir, a) = fresh("");
    assert!(!alice_may(&a, "t", Op::Read));
    let (_dir2, b) = fresh("allow_everyone_if_no_acl_found = true");
    assert!(alice_may(&b, "t", Op::Read));
    // An ACL naming the resource, for someone else: no longer "no ACL found".
    create_ok(
        &b,
        vec![topic("t", Pt::Literal, "User:bob", Op::Read, Perm::Allow)],
    );
    assert!(!alice_may(&b, "t", Op::Read));
    assert!(alice_may(&b, "u", Op::Read));
    // A prefixed ACL covering it counts too.
    create_ok(
        &b,
        vec![topic("u", Pt::Prefixed, "User:bob", Op::Read, Perm::Allow)],
    );
    assert!(!alice_may(&b, "u1", Op::Read));
}

#[test]
fn one_decision_per_action_in_order() {
    let (_dir, a) = fresh("");
    create_ok(
        &a,
        vec![topic(
            "yes",
            Pt::Literal,
            "User:alice",
            Op::Write,
            Perm::Allow,
        )],
    );
    let actions = [
        action(Rt::Topic, "yes", Op::Write),
        action(Rt::Topic, "no", Op::Write),
        action(Rt::Topic, "yes", Op::Read),
        action(Rt::Topic, "yes", Op::Describe),
    ];
    let d = a
        .authorize(&ctx("User:alice", "10.0.0.1"), RSlice::from_slice(&actions))
        .unwrap();
    let got: Vec<bool> = d.iter().map(|d| d.is_allowed()).collect();
    assert_eq!(got, [true, false, false, true]);
    let none = a
        .authorize(&ctx("User:alice", "10.0.0.1"), RSlice::from_slice(&[]))
        .unwrap();
    assert!(none.is_empty());
}

#[test]
fn implications_follow_kafka() {
    let (_dir, a) = fresh("");
    for (op, name) in [
        (Op::Read, "r"),
        (Op::Write, "w"),
        (Op::Delete, "d"),
        (Op::Alter, "a"),
        (Op::AlterConfigs, "ac"),
        (Op::All, "all"),
        (Op::Create, "c"),
    ] {
        create_ok(
            &a,
            vec![topic(name, Pt::Literal, "User:alice", op, Perm::Allow)],
        );
    }
    for name in ["r", "w", "d", "a", "all"] {
        assert!(alice_may(&a, name, Op::Describe), "{name} implies DESCRIBE");
    }
    assert!(
        !alice_may(&a, "c", Op::Describe),
        "CREATE does not imply DESCRIBE"
    );
    assert!(!alice_may(&a, "ac", Op::Describe));
    assert!(alice_may(&a, "ac", Op::DescribeConfigs));
    assert!(!alice_may(&a, "r", Op::DescribeConfigs));
    assert!(!alice_may(&a, "w", Op::Read), "WRITE does not imply READ");
    assert!(!alice_may(&a, "r", Op::Write));
    for op in [
        Op::Read,
        Op::Write,
        Op::Create,
        Op::Delete,
        Op::AlterConfigs,
        Op::ClusterAction,
    ] {
        assert!(alice_may(&a, "all", op), "ALL implies {op}");
    }
    // A DENY applies to its own operation only: DENY READ does not deny DESCRIBE that an
    // ALLOW WRITE gives; DENY ALL denies everything.
    create_ok(
        &a,
        vec![
            topic("w", Pt::Literal, "User:alice", Op::Read, Perm::Deny),
            topic("r", Pt::Literal, "User:alice", Op::All, Perm::Deny),
        ],
    );
    assert!(alice_may(&a, "w", Op::Describe));
    assert!(!alice_may(&a, "r", Op::Describe));
    assert!(!alice_may(&a, "r", Op::Read));
}

#[test]
fn patterns_principals_and_hosts() {
    let (_dir, a) = fresh("");
    create_ok(
        &a,
        vec![
            topic("orders", Pt::Literal, "User:alice", Op::Read, Perm::Allow),
            topic(
                "billing-",
                Pt::Prefixed,
                "User:alice",
                Op::Read,
                Perm::Allow,
            ),
            topic(
                "billing-secret",
                Pt::Prefixed,
                "User:alice",
                Op::Read,
                Perm::Deny,
            ),
            topic("*", Pt::Literal, "User:*", Op::Describe, Perm::Allow),
            acl(
                Rt::Topic,
                "hosted",
                Pt::Literal,
                "User:alice",
                "10.0.0.2",
                Op::Read,
                Perm::Allow,
            ),
            acl(
                Rt::Topic,
                "v6",
                Pt::Literal,
                "User:alice",
                "::1",
                Op::Read,
                Perm::Allow,
            ),
            acl(
                Rt::Group,
                "g",
                Pt::Literal,
                "User:alice",
                "*",
                Op::Read,
                Perm::Allow,
            ),
        ],
    );
    assert!(alice_may(&a, "orders", Op::Read));
    assert!(!alice_may(&a, "orders2", Op::Read), "literal is exact");
    assert!(!alice_may(&a, "order", Op::Read));
    assert!(alice_may(&a, "billing-eu", Op::Read));
    assert!(
        alice_may(&a, "billing-", Op::Read),
        "a prefix matches itself"
    );
    assert!(!alice_may(&a, "billing", Op::Read));
    assert!(
        !alice_may(&a, "billing-secret-2", Op::Read),
        "longer DENY prefix"
    );
    // `*` literal and `User:*`: everyone may describe every topic.
    assert!(allowed(
        &a,
        "User:zed",
        "1.2.3.4",
        Rt::Topic,
        "anything",
        Op::Describe
    ));
    assert!(allowed(
        &a,
        "User:zed",
        "1.2.3.4",
        Rt::Topic,
        "*",
        Op::Describe
    ));
    assert!(!allowed(
        &a,
        "User:zed",
        "1.2.3.4",
        Rt::Group,
        "g",
        Op::Describe
    ));
    // Host filters: exact address, or the same address written otherwise.
    assert!(!alice_may(&a, "hosted", Op::Read));
    assert!(allowed(
        &a,
        "User:alice",
        "10.0.0.2",
        Rt::Topic,
        "hosted",
        Op::Read
    ));
    assert!(allowed(
        &a,
        "User:alice",
        "0:0:0:0:0:0:0:1",
        Rt::Topic,
        "v6",
        Op::Read
    ));
    // Types are separate.
    assert!(allowed(
        &a,
        "User:alice",
        "1.1.1.1",
        Rt::Group,
        "g",
        Op::Read
    ));
    assert!(!alice_may(&a, "g", Op::Read));
    // Principal types are compared whole: `Group:alice` is not `User:alice`.
    assert!(!allowed(
        &a,
        "Group:alice",
        "10.0.0.1",
        Rt::Topic,
        "orders",
        Op::Read
    ));
}

#[test]
fn deny_beats_allow() {
    let (_dir, a) = fresh("");
    create_ok(
        &a,
        vec![
            topic("t", Pt::Literal, "User:alice", Op::All, Perm::Allow),
            topic("*", Pt::Literal, "User:*", Op::Write, Perm::Deny),
        ],
    );
    assert!(alice_may(&a, "t", Op::Read));
    assert!(!alice_may(&a, "t", Op::Write));
}

#[test]
fn super_users_and_unknown_codes() {
    let (_dir, a) = fresh("super_users = ['User:admin']");
    create_ok(
        &a,
        vec![topic("*", Pt::Literal, "User:*", Op::All, Perm::Deny)],
    );
    let admin = |t: Rt, op: Op| allowed(&a, "User:admin", "10.9.9.9", t, "x", op);
    assert!(
        admin(Rt::Topic, Op::Write),
        "DENY does not bind a super user"
    );
    assert!(admin(Rt::Cluster, Op::ClusterAction));
    assert!(admin(Rt::DelegationToken, Op::Describe));
    assert!(admin(Rt::User, Op::CreateTokens));
    // Codes this build does not know, and filter-only values, are denied to everyone.
    assert!(!admin(Rt::from_code(42), Op::Read));
    assert!(!admin(Rt::Topic, Op::from_code(99)));
    assert!(!admin(Rt::Topic, Op::Any));
    assert!(!admin(Rt::Topic, Op::Unknown));
    let mut prefixed = action(Rt::Topic, "x", Op::Read);
    prefixed.pattern_type = Pt::Prefixed;
    let d = a
        .authorize(
            &ctx("User:admin", "1.1.1.1"),
            RSlice::from_slice(&[prefixed]),
        )
        .unwrap();
    assert!(!d[0].is_allowed());
    // Types this authorizer keeps no ACLs for: super users only.
    let (_dir2, open_all) = fresh("allow_everyone_if_no_acl_found = true");
    assert!(!allowed(
        &open_all,
        "User:bob",
        "1.1.1.1",
        Rt::DelegationToken,
        "x",
        Op::Describe
    ));
    assert!(allowed(
        &open_all,
        "User:bob",
        "1.1.1.1",
        Rt::TransactionalId,
        "x",
        Op::Write
    ));
}

#[test]
fn authorize_any_follows_kip_679() {
    let (_dir, a) = fresh("super_users = ['User:admin']");
    assert!(any_of(&a, "User:admin", Rt::Topic, Op::Write));
    assert!(!any_of(&a, "User:alice", Rt::Topic, Op::Write));
    create_ok(
        &a,
        vec![topic(
            "t",
            Pt::Literal,
            "User:alice",
            Op::Write,
            Perm::Allow,
        )],
    );
    assert!(any_of(&a, "User:alice", Rt::Topic, Op::Write));
    assert!(!any_of(&a, "User:bob", Rt::Topic, Op::Write));
    assert!(!any_of(&a, "User:alice", Rt::Group, Op::Write));
    // No implication in the scan: ALLOW WRITE on a topic is not "DESCRIBE some topic".
    assert!(!any_of(&a, "User:alice", Rt::Topic, Op::Describe));
    // A DENY on the same literal cancels it; a DENY on a prefix of it too.
    create_ok(
        &a,
        vec![topic("t", Pt::Literal, "User:alice", Op::Write, Perm::Deny)],
    );
    assert!(!any_of(&a, "User:alice", Rt::Topic, Op::Write));
    create_ok(
        &a,
        vec![
            topic("pre-x", Pt::Prefixed, "User:alice", Op::Write, Perm::Allow),
            topic("pre", Pt::Prefixed, "User:*", Op::Write, Perm::Deny),
        ],
    );
    assert!(!any_of(&a, "User:alice", Rt::Topic, Op::Write));
    // A DENY on a longer prefix does not cover the whole ALLOW.
    create_ok(
        &a,
        vec![topic("q", Pt::Prefixed, "User:alice", Op::All, Perm::Allow)],
    );
    create_ok(
        &a,
        vec![topic(
            "q-secret",
            Pt::Prefixed,
            "User:alice",
            Op::Write,
            Perm::Deny,
        )],
    );
    assert!(any_of(&a, "User:alice", Rt::Topic, Op::Write));
    // DENY on the literal wildcard denies outright; ALLOW on it allows.
    create_ok(
        &a,
        vec![topic("*", Pt::Literal, "User:alice", Op::Write, Perm::Deny)],
    );
    assert!(!any_of(&a, "User:alice", Rt::Topic, Op::Write));
    create_ok(
        &a,
        vec![topic("*", Pt::Literal, "User:bob", Op::Read, Perm::Allow)],
    );
    assert!(any_of(&a, "User:bob", Rt::Topic, Op::Read));
    // Unknown codes and filter-only values: denied.
    assert!(!any_of(&a, "User:admin", Rt::Any, Op::Write));
    assert!(!any_of(&a, "User:admin", Rt::Topic, Op::Any));
}

#[test]
fn invalid_bindings_are_refused_one_by_one() {
    let (_dir, a) = fresh("max_name_bytes = 20");
    let good = topic("t", Pt::Literal, "User:alice", Op::Read, Perm::Allow);
    let with = |f: &dyn Fn(&mut AclBinding)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    let bad = vec![
        with(&|b| b.pattern.resource_type = Rt::Any),
        with(&|b| b.pattern.resource_type = Rt::Unknown),
        with(&|b| b.pattern.resource_type = Rt::from_code(40)),
        with(&|b| b.pattern.resource_type = Rt::DelegationToken),
        with(&|b| b.pattern.pattern_type = Pt::Match),
        with(&|b| b.pattern.pattern_type = Pt::Any),
        with(&|b| b.pattern.pattern_type = Pt::from_code(9)),
        with(&|b| b.entry.operation = Op::Any),
        with(&|b| b.entry.operation = Op::Unknown),
        with(&|b| b.entry.operation = Op::from_code(50)),
        with(&|b| b.entry.permission = Perm::Any),
        with(&|b| b.entry.permission = Perm::from_code(7)),
        with(&|b| b.pattern.name = "".into()),
        with(&|b| b.entry.principal = "alice".into()),
        with(&|b| b.entry.principal = ":alice".into()),
        with(&|b| b.entry.host = "".into()),
        with(&|b| b.pattern.name = "x".repeat(21).into()),
        with(&|b| {
            b.pattern.resource_type = Rt::Cluster;
            b.pattern.name = "my-cluster".into();
        }),
    ];
    let n = bad.len();
    let mut all = bad;
    all.push(good.clone());
    all.push(good.clone());
    let results = create(&a, all);
    for (i, r) in results.iter().take(n).enumerate() {
        let e = r.as_ref().unwrap_or_else(|| panic!("binding {i} accepted"));
        assert_eq!(e.kind, ErrorKind::InvalidInput, "{i}: {e:?}");
    }
    assert!(
        results[n].is_none() && results[n + 1].is_none(),
        "duplicates are fine"
    );
    assert_eq!(describe(&a, any_filter()), vec![good]);
}

#[test]
fn filters_select_as_kafka() {
    let (_dir, a) = fresh("");
    let lit = topic("foo", Pt::Literal, "User:alice", Op::Read, Perm::Allow);
    let star = topic("*", Pt::Literal, "User:bob", Op::Write, Perm::Deny);
    let pre = topic("fo", Pt::Prefixed, "User:alice", Op::Read, Perm::Allow);
    let other = topic("bar", Pt::Prefixed, "User:alice", Op::Read, Perm::Allow);
    let group = acl(
        Rt::Group,
        "foo",
        Pt::Literal,
        "User:alice",
        "1.2.3.4",
        Op::Read,
        Perm::Allow,
    );
    create_ok(
        &a,
        vec![
            group.clone(),
            other.clone(),
            pre.clone(),
            star.clone(),
            lit.clone(),
        ],
    );
    // Everything, sorted.
    let all = describe(&a, any_filter());
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    assert_eq!(all.len(), 5);
    let f = |t: Rt, name: Option<&str>, pt: Pt| AclBindingFilter {
        resource_type: t,
        name: name.map(RString::from).into(),
        pattern_type: pt,
        ..any_filter()
    };
    let names = |v: Vec<AclBinding>| -> Vec<String> {
        v.into_iter()
            .map(|b| {
                format!(
                    "{}:{}:{}",
                    b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name
                )
            })
            .collect()
    };
    assert_eq!(
        names(describe(&a, f(Rt::Topic, Some("foo"), Pt::Match))),
        ["TOPIC:LITERAL:*", "TOPIC:PREFIXED:fo", "TOPIC:LITERAL:foo"]
    );
    assert_eq!(
        names(describe(&a, f(Rt::Any, Some("foo"), Pt::Any))),
        ["TOPIC:LITERAL:foo", "GROUP:LITERAL:foo"]
    );
    assert_eq!(
        names(describe(&a, f(Rt::Topic, Some("fo"), Pt::Literal))),
        Vec::<String>::new()
    );
    assert_eq!(
        names(describe(&a, f(Rt::Topic, None, Pt::Prefixed))),
        ["TOPIC:PREFIXED:bar", "TOPIC:PREFIXED:fo"]
    );
    let by_entry = AclBindingFilter {
        principal: RSome("User:bob".into()),
        ..any_filter()
    };
    assert_eq!(describe(&a, by_entry), vec![star.clone()]);
    let by_host = AclBindingFilter {
        host: RSome("1.2.3.4".into()),
        permission: Perm::Allow,
        operation: Op::Read,
        ..any_filter()
    };
    assert_eq!(describe(&a, by_host), vec![group.clone()]);
    // A filter with an unknown field is refused.
    for bad in [
        f(Rt::Unknown, None, Pt::Any),
        f(Rt::Any, None, Pt::Unknown),
        f(Rt::from_code(33), None, Pt::Any),
        AclBindingFilter {
            operation: Op::Unknown,
            ..any_filter()
        },
    ] {
        assert_eq!(a.acls(&bad).unwrap_err().kind, ErrorKind::InvalidInput);
    }
    // Delete with MATCH: what would apply to topic `foo`, per filter; an invalid filter
    // fails alone.
    let results: Vec<_> = a
        .delete_acls(
            vec![
                f(Rt::Topic, Some("foo"), Pt::Match),
                f(Rt::Unknown, None, Pt::Any),
                f(Rt::Topic, Some("nothing"), Pt::Literal),
            ]
            .into(),
        )
        .unwrap()
        .into_iter()
        .map(|r| r.into_result())
        .collect();
    let deleted: Vec<AclBinding> = results[0].clone().unwrap().into_iter().collect();
    assert_eq!(deleted, vec![star, pre, lit]);
    assert_eq!(
        results[1].clone().unwrap_err().kind,
        ErrorKind::InvalidInput
    );
    assert!(results[2].clone().unwrap().is_empty());
    assert_eq!(describe(&a, any_filter()), vec![other, group]);
}

#[test]
fn acls_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let bindings = vec![
        topic("orders", Pt::Literal, "User:alice", Op::Read, Perm::Allow),
        topic(
            "na\u{ef}ve/x y",
            Pt::Prefixed,
            "User:b\u{f6}b",
            Op::Write,
            Perm::Deny,
        ),
        acl(
            Rt::Cluster,
            "kafka-cluster",
            Pt::Literal,
            "User:ops",
            "::1",
            Op::Alter,
            Perm::Allow,
        ),
    ];
    {
        let a = open(dir.path(), "");
        create_ok(&a, bindings.clone());
        let f = AclBindingFilter {
            principal: RSome("User:ops".into()),
            ..any_filter()
        };
        a.delete_acls(vec![f].into()).unwrap();
    }
    let a = open(dir.path(), "");
    let mut wanted = bindings[..2].to_vec();
    wanted.sort();
    assert_eq!(describe(&a, any_filter()), wanted);
    assert!(alice_may(&a, "orders", Op::Read));
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["acls"]);
}

#[test]
fn a_corrupt_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    {
        let a = open(dir.path(), "");
        create_ok(
            &a,
            vec![
                topic("orders", Pt::Literal, "User:alice", Op::Read, Perm::Allow),
                topic("b", Pt::Literal, "User:alice", Op::Read, Perm::Deny),
            ],
        );
    }
    let path = dir.path().join("acls");
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    let at = good.len() - 20;
    flipped[at] ^= 0x01;
    let mut new_format = good.clone();
    new_format[b"drover-acls ".len()] = b'2';
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("torn", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("flipped bit", flipped),
        ("garbage", b"hello\nworld".to_vec()),
        ("format", new_format),
        (
            "unknown operation",
            String::from_utf8(good.clone())
                .unwrap()
                .replace("\"READ\"", "\"REED\"")
                .into_bytes(),
        ),
    ];
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let e = open_in(dir.path(), "")
            .err()
            .unwrap_or_else(|| panic!("{what}: opened"));
        assert_eq!(e.kind, ErrorKind::InvalidConfig, "{what}");
        assert!(
            e.message.contains("corrupt") && e.message.contains(&*path.to_string_lossy()),
            "{what}: {e:?}"
        );
    }
    std::fs::write(&path, &good).unwrap();
    assert!(alice_may(&open(dir.path(), ""), "orders", Op::Read));
}

#[test]
fn path_is_required_standalone() {
    let e = in_process::authorizer::<AclAuthorizer>("").err().unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidConfig);
    assert!(e.message.contains("path"), "{e:?}");
    let e = in_process::authorizer::<AclAuthorizer>("path = '/tmp/x'\nbogus = 1")
        .err()
        .unwrap();
    assert!(e.message.contains("bogus"), "{e:?}");
}

#[test]
fn limits_are_enforced_per_binding() {
    let (_dir, a) = fresh("max_acls = 3\nmax_entries_per_resource = 2");
    let r = create(
        &a,
        vec![
            topic("t", Pt::Literal, "User:a", Op::Read, Perm::Allow),
            topic("t", Pt::Literal, "User:b", Op::Read, Perm::Allow),
            topic("t", Pt::Literal, "User:c", Op::Read, Perm::Allow),
            topic("u", Pt::Literal, "User:a", Op::Read, Perm::Allow),
            topic("v", Pt::Literal, "User:a", Op::Read, Perm::Allow),
        ],
    );
    let failed: Vec<bool> = r.iter().map(Option::is_some).collect();
    assert_eq!(failed, [false, false, true, false, true]);
    assert!(r[2]
        .as_ref()
        .unwrap()
        .message
        .contains("max_entries_per_resource"));
    assert!(r[4].as_ref().unwrap().message.contains("max_acls"));
    assert_eq!(describe(&a, any_filter()).len(), 3);
}

// ---- the naive reference model ----

/// Kafka's rules written directly over the list of bindings.
fn reference(
    acls: &[AclBinding],
    allow_everyone: bool,
    principal: &str,
    host: &str,
    t: Rt,
    name: &str,
    op: Op,
) -> bool {
    let on_resource: Vec<&AclBinding> = acls
        .iter()
        .filter(|b| {
            b.pattern.resource_type == t
                && match b.pattern.pattern_type {
                    Pt::Literal => b.pattern.name == name || b.pattern.name == "*",
                    _ => name.starts_with(b.pattern.name.as_str()),
                }
        })
        .collect();
    if on_resource.is_empty() {
        return allow_everyone;
    }
    let applies = |b: &&&AclBinding| {
        (b.entry.principal == principal || b.entry.principal == "User:*")
            && (b.entry.host == host || b.entry.host == "*")
    };
    let implied = |granted: Op| match op {
        Op::Describe => [Op::Read, Op::Write, Op::Delete, Op::Alter].contains(&granted),
        Op::DescribeConfigs => granted == Op::AlterConfigs,
        _ => false,
    };
    let denied = on_resource.iter().filter(applies).any(|b| {
        b.entry.permission == Perm::Deny
            && (b.entry.operation == op || b.entry.operation == Op::All)
    });
    let allowed = on_resource.iter().filter(applies).any(|b| {
        b.entry.permission == Perm::Allow
            && (b.entry.operation == op
                || b.entry.operation == Op::All
                || implied(b.entry.operation))
    });
    !denied && allowed
}

const NAMES: [&str; 7] = ["a", "ab", "abc", "abd", "b", "*", "\u{e9}t\u{e9}"];
const OPS: [Op; 8] = [
    Op::All,
    Op::Read,
    Op::Write,
    Op::Describe,
    Op::Alter,
    Op::AlterConfigs,
    Op::DescribeConfigs,
    Op::Create,
];
const PRINCIPALS: [&str; 3] = ["User:a", "User:b", "User:*"];
const HOSTS: [&str; 3] = ["*", "10.0.0.1", "10.0.0.2"];

fn binding_strategy() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(vec![Rt::Topic, Rt::Group]),
        prop::sample::select(NAMES.to_vec()),
        prop::bool::ANY,
        prop::sample::select(PRINCIPALS.to_vec()),
        prop::sample::select(HOSTS.to_vec()),
        prop::sample::select(OPS.to_vec()),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(t, name, prefixed, principal, host, op, deny)| {
            let pt = if prefixed { Pt::Prefixed } else { Pt::Literal };
            let perm = if deny { Perm::Deny } else { Perm::Allow };
            acl(t, name, pt, principal, host, op, perm)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The index decides every question as the reference model does.
    #[test]
    fn matches_the_reference_model(
        acls in prop::collection::vec(binding_strategy(), 0..24),
        allow_everyone in prop::bool::ANY,
    ) {
        let (_dir, a) = fresh(&format!("allow_everyone_if_no_acl_found = {allow_everyone}"));
        create_ok(&a, acls.clone());
        let mut actions = Vec::new();
        let mut queries = Vec::new();
        for t in [Rt::Topic, Rt::Group] {
            for name in NAMES.iter().chain(&["abcd", "c", "ab*"]) {
                for op in OPS.iter().skip(1) {
                    actions.push(action(t, name, *op));
                    queries.push((t, *name, *op));
                }
            }
        }
        for principal in ["User:a", "User:b"] {
            for host in ["10.0.0.1", "10.0.0.2"] {
                let d = a.authorize(&ctx(principal, host), RSlice::from_slice(&actions)).unwrap();
                prop_assert_eq!(d.len(), queries.len());
                for (d, (t, name, op)) in d.iter().zip(&queries) {
                    let want = reference(&acls, allow_everyone, principal, host, *t, name, *op);
                    prop_assert_eq!(d.is_allowed(), want, "{} {} {:?} {} {}", principal, host, t, name, op);
                }
            }
        }
    }

    /// Whatever the ACLs, adding a DENY that applies denies.
    #[test]
    fn a_matching_deny_always_wins(
        acls in prop::collection::vec(binding_strategy(), 0..16),
        deny in binding_strategy(),
        name_suffix in prop::sample::select(vec!["", "x", "yz"]),
    ) {
        let (_dir, a) = fresh("allow_everyone_if_no_acl_found = true");
        let mut deny = deny;
        deny.entry.permission = Perm::Deny;
        let mut all = acls;
        all.push(deny.clone());
        create_ok(&a, all);
        let op = if deny.entry.operation == Op::All { Op::Read } else { deny.entry.operation };
        let principal = if deny.entry.principal == "User:*" { "User:zed" } else { deny.entry.principal.as_str() };
        let host = if deny.entry.host == "*" { "10.9.9.9" } else { deny.entry.host.as_str() };
        let name = match (deny.pattern.pattern_type, deny.pattern.name.as_str()) {
            (Pt::Literal, "*") => format!("any{name_suffix}"),
            (Pt::Literal, n) => n.to_owned(),
            (_, n) => format!("{n}{name_suffix}"),
        };
        prop_assert!(!allowed(&a, principal, host, deny.pattern.resource_type, &name, op));
    }
}
