//! The `acl` authorizer in cluster mode: two real brokers (`serve::start` with
//! `[zookeeper] enabled`, one chroot) against a real ZooKeeper from the testkit, each
//! lending its session (`cluster::session::for_plugins`) to an instance of the built
//! `.so` loaded through the host's loader.
//!
//! - an ACL created through one broker's instance decides on the other's within its
//!   poll interval, and a deletion too;
//! - both brokers creating ACLs at once (four threads each) lose none;
//! - a new instance (a restarted broker) reads every ACL back;
//! - a node it cannot read refuses a new instance, naming the node.

use std::time::{Duration, Instant};

use drover_abi::{
    authorizer::{
        AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission, Action,
        PatternType, RequestContext, ResourcePattern, ResourceType,
    },
    std_types::RNone,
    PluginKind,
};
use drover_host::{cluster::session, plugins::AuthorizerHandle, serve::Running};
use drover_tests::{
    cluster_broker,
    services::zookeeper::{unique_chroot, ZkServer},
    PluginDir,
};
use zookeeper_client as zk;

const POLL_MS: u64 = 100;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn authorizer(dir: &PluginDir, running: &Running) -> Result<AuthorizerHandle, String> {
    let path = dir.add_built("drover_authorizer_acl");
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Authorizer))
        .unwrap_or_else(|e| panic!("{e}"));
    let session = session::for_plugins(running.broker.cluster().expect("cluster mode"));
    plugin
        .new_authorizer(
            &format!("poll_interval_ms = {POLL_MS}\nsuper_users = ['User:admin']\n"),
            Some(session),
        )
        .map_err(|e| e.to_string())
}

fn binding(name: &str, principal: &str, op: AclOperation, perm: AclPermission) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern_type: PatternType::Literal,
        },
        entry: AccessControlEntry {
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        },
    }
}

fn all() -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::Any,
        name: RNone,
        pattern_type: PatternType::Any,
        principal: RNone,
        host: RNone,
        operation: AclOperation::Any,
        permission: AclPermission::Any,
    }
}

fn may_read(a: &AuthorizerHandle, principal: &str, topic: &str) -> bool {
    let context = RequestContext {
        principal: principal.into(),
        listener: "CLIENT".into(),
        security_protocol: "PLAINTEXT".into(),
        sasl_mechanism: RNone,
        client_address: "127.0.0.1".into(),
        client_id: "t".into(),
        api_key: 1,
        api_version: 12,
        correlation_id: 1,
    };
    let action = Action {
        resource_type: ResourceType::Topic,
        resource_name: topic.into(),
        pattern_type: PatternType::Literal,
        operation: AclOperation::Read,
        reference_count: 1,
        log_if_allowed: false,
        log_if_denied: false,
    };
    a.authorize(&context, &[action]).unwrap()[0].is_allowed()
}

fn create(a: &AuthorizerHandle, bindings: Vec<AclBinding>) {
    for r in a.create_acls(bindings).unwrap() {
        assert!(r.is_none(), "{r:?}");
    }
}

/// Waits until `f` holds (polling), or fails after `within`.
fn eventually(within: Duration, what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn acls_are_shared_by_brokers_through_zookeeper() {
    let server = ZkServer::shared();
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    let chroot = unique_chroot("acl");
    let b1 = cluster_broker::start(&rt, &server.connect(), root.path(), &chroot, 1, "");
    let b2 = cluster_broker::start(&rt, &server.connect(), root.path(), &chroot, 2, "");
    let dir = PluginDir::new();
    let a1 = authorizer(&dir, &b1).unwrap();
    let a2 = authorizer(&dir, &b2).unwrap();
    let propagation = Duration::from_millis(POLL_MS * 50);

    // Created on broker 1: at once there, within a poll on broker 2.
    create(
        &a1,
        vec![binding(
            "orders",
            "User:alice",
            AclOperation::Read,
            AclPermission::Allow,
        )],
    );
    assert!(may_read(&a1, "User:alice", "orders"));
    eventually(propagation, "broker 2 sees the ALLOW", || {
        may_read(&a2, "User:alice", "orders")
    });
    // A DENY from broker 2 wins on broker 1.
    create(
        &a2,
        vec![binding(
            "orders",
            "User:*",
            AclOperation::Read,
            AclPermission::Deny,
        )],
    );
    eventually(propagation, "broker 1 sees the DENY", || {
        !may_read(&a1, "User:alice", "orders")
    });
    assert!(may_read(&a1, "User:admin", "orders"), "super user");

    // Both brokers create at once: nothing is lost.
    std::thread::scope(|s| {
        for (b, a) in [(1, &a1), (2, &a2)] {
            for t in 0..4 {
                s.spawn(move || {
                    for i in 0..10 {
                        let name = format!("b{b}-t{t}-{i}");
                        create(
                            a,
                            vec![binding(
                                &name,
                                "User:bob",
                                AclOperation::Write,
                                AclPermission::Allow,
                            )],
                        );
                    }
                });
            }
        }
    });
    let wanted = 2 + 2 * 4 * 10;
    eventually(propagation, "both brokers see every ACL", || {
        a1.acls(&all()).unwrap().len() == wanted && a2.acls(&all()).unwrap().len() == wanted
    });
    assert_eq!(a1.acls(&all()).unwrap(), a2.acls(&all()).unwrap());

    // Deleted on broker 2: gone on broker 1.
    let deleted = a2
        .delete_acls(vec![AclBindingFilter {
            permission: AclPermission::Deny,
            ..all()
        }])
        .unwrap();
    assert_eq!(deleted[0].clone().unwrap().len(), 1);
    eventually(propagation, "broker 1 sees the deletion", || {
        may_read(&a1, "User:alice", "orders")
    });

    // A restarted broker's instance reads everything back.
    drop(a1);
    let again = authorizer(&dir, &b1).unwrap();
    assert_eq!(again.acls(&all()).unwrap().len(), wanted - 1);
    assert!(may_read(&again, "User:alice", "orders"));

    // A node it cannot read refuses a new instance, naming it.
    rt.block_on(async {
        let client = zk::Client::connect(&server.connect()).await.unwrap();
        let path = format!("{chroot}/drover-acls/TOPIC/LITERAL/orders");
        client.set_data(&path, b"not json", None).await.unwrap();
    });
    let Err(e) = authorizer(&dir, &b2) else {
        panic!("a corrupt node was read")
    };
    assert!(
        e.contains("TOPIC/LITERAL/orders") && e.contains("InvalidConfig"),
        "{e}"
    );
    drop((again, a2));
    rt.block_on(async {
        b1.stop().await;
        b2.stop().await;
    });
}
