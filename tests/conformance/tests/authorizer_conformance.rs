//! The authorizer conformance suite (`drover-plugin-testkit`) through loaded `.so`
//! files: the example authorizer (no ACLs: the ACL properties skipped) and the
//! in-memory ACL fixture (every property) pass; the fixture with a fault fails the
//! property it breaks; a panicking authorizer is taken out of service and every later
//! call fails (the host denies on any failure).

use drover_abi::{
    authorizer::{AclOperation, Action, ResourceType},
    ErrorKind, PluginKind,
};
use drover_host::plugins::{AuthorizerHandle, CallError, LoadError, PluginRegistry};
use drover_plugin_testkit::{
    authorizer::{action, context, run, Options},
    Verdict,
};
use drover_tests::PluginDir;

fn load(dir: &PluginDir, lib: &str, config: &str) -> Result<AuthorizerHandle, LoadError> {
    let path = dir.add_built(lib);
    let plugin = dir.loader().load(&path, Some(PluginKind::Authorizer))?;
    assert_eq!(plugin.summary.kind, PluginKind::Authorizer);
    assert_eq!(
        plugin.summary.abi,
        PluginKind::Authorizer.abi_version().to_string()
    );
    plugin.new_authorizer(config, None)
}

#[test]
fn the_example_passes_and_skips_the_acl_properties() {
    let dir = PluginDir::new();
    let policy = dir.scratch("policy");
    std::fs::write(
        &policy,
        "super User:admin\nlabel topic * all\ngrant User:* all read\n",
    )
    .unwrap();
    let config = format!("policy = {:?}", policy.display().to_string());
    let handle = load(&dir, "drover_example_policy_authorizer", &config).unwrap();
    assert_eq!(handle.summary().name, "policy-file");
    let report = run(
        &handle.instance(),
        &Options::default().super_user("User:admin"),
    );
    assert!(report.passed(), "{report}");
    assert_eq!(
        report.verdict("super_user"),
        Some(&Verdict::Pass),
        "{report}"
    );
    for property in ["acl_round_trip", "deny_beats_allow"] {
        let Some(Verdict::Skip(why)) = report.verdict(property) else {
            panic!("{report}")
        };
        assert!(why.contains("keeps no ACLs"), "{why}");
    }
}

#[test]
fn an_acl_authorizer_passes_every_property_and_a_faulty_one_fails() {
    let dir = PluginDir::new();
    let options = Options::default().super_user("User:admin").cases(16);
    let correct = load(
        &dir,
        "drover_fixture_faulty_authorizer",
        "super_user = \"User:admin\"",
    )
    .unwrap();
    let report = run(&correct.instance(), &options);
    assert!(report.passed(), "{report}");
    assert_eq!(report.counts(), (7, 0, 0), "{report}");

    let plugin = dir
        .loader()
        .load(
            &dir.path().join("libdrover_fixture_faulty_authorizer.so"),
            None,
        )
        .unwrap();
    let too_few = plugin.new_authorizer("fault = \"too_few\"", None).unwrap();
    let report = run(&too_few.instance(), &options);
    assert!(
        matches!(
            report.verdict("one_decision_per_action"),
            Some(Verdict::Fail(_))
        ),
        "{report}"
    );
    // The host's handle refuses such an answer itself (the broker then denies).
    let err = too_few
        .authorize(&context("User:x"), &[read("t")])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("answered 0 decisions for 1 actions"),
        "{err}"
    );
}

fn read(topic: &str) -> Action {
    action(ResourceType::Topic, topic, AclOperation::Read)
}

#[test]
fn a_panicking_authorizer_errors_and_is_taken_out_of_service() {
    let dir = PluginDir::new();
    dir.add_built("drover_fixture_panicking_authorizer");
    dir.add_built("drover_assignor_range");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let plugin = registry.find(PluginKind::Authorizer, "panicking").unwrap();
    let authz = plugin.new_authorizer("", None).unwrap();
    let me = context("User:alice");
    let decisions = authz.authorize(&me, &[read("orders")]).unwrap();
    assert!(decisions[0].is_allowed(), "allows before the panic");

    let err = authz
        .authorize(&me, &[read("orders"), read("panic")])
        .unwrap_err();
    match &err {
        CallError::Plugin { plugin, error } => {
            assert_eq!(plugin, "panicking");
            assert_eq!(error.kind, ErrorKind::Panicked);
            assert!(
                error
                    .message
                    .contains("asked about a resource named `panic`"),
                "{err}"
            );
        }
        other => panic!("unexpected {other}"),
    }
    assert!(authz.is_out_of_service());
    let err = authz.authorize(&me, &[read("orders")]).unwrap_err();
    assert!(matches!(err, CallError::OutOfService { .. }), "{err}");

    // A panic in `new` is an error too, and the host keeps running.
    let err = plugin
        .new_authorizer("panic_in_new = true", None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("asked to panic in new"), "{err}");
    let other = plugin.new_authorizer("", None).unwrap();
    let err = other
        .authorize_any(&me, ResourceType::Group, AclOperation::Read)
        .unwrap_err();
    assert!(err.to_string().contains("asked about any group"), "{err}");
    registry
        .find(PluginKind::Assignor, "range")
        .unwrap()
        .new_assignor("")
        .expect("the other plugins keep working");
}
