//! The `acl` authorizer through its loaded `.so` (the host's loader and handle, as the
//! broker calls it): the cost of one request's check with 10, 1,000 and 100,000 ACLs.
//!
//! - `authorize/produce/N`: one action (WRITE on a topic the principal may write);
//! - `authorize/fetch-10/N`: ten actions (READ on ten topics, some through a prefix);
//! - `authorize/denied/N`: one action nothing allows (every index is searched);
//! - `authorize_any/N`: KIP-679's check (IdempotentWrite fallback: WRITE on any topic).
//!
//! `cargo bench -p drover-tests --bench authorizer`. Figures go in docs/benchmarks.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use drover_abi::{
    authorizer::{
        AccessControlEntry, AclBinding, AclOperation, AclPermission, Action, PatternType,
        RequestContext, ResourcePattern, ResourceType,
    },
    std_types::RNone,
    PluginKind,
};
use drover_tests::PluginDir;

/// `n` bindings: ten per principal `User:u<k>` (up to 1,000 principals; `User:u0` has
/// the first ten in every set): literal WRITE and READ on topics, prefixed READ on a
/// team prefix with a prefixed DENY below it, READ on a group; and DESCRIBE on every
/// topic for everyone.
fn bindings(n: usize) -> Vec<AclBinding> {
    let b = |t: ResourceType, name: String, pt: PatternType, who: String, op, perm| AclBinding {
        pattern: ResourcePattern {
            resource_type: t,
            name: name.into(),
            pattern_type: pt,
        },
        entry: AccessControlEntry {
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        },
    };
    let mut out = vec![b(
        ResourceType::Topic,
        "*".into(),
        PatternType::Literal,
        "User:*".into(),
        AclOperation::Describe,
        AclPermission::Allow,
    )];
    let mut i = 0usize;
    while out.len() < n {
        let who = format!("User:u{}", (i / 10) % 1000);
        let (t, name, pt, op, perm) = match i % 10 {
            0..=4 => (
                ResourceType::Topic,
                format!("topic-{i}"),
                PatternType::Literal,
                AclOperation::Write,
                AclPermission::Allow,
            ),
            5 | 6 => (
                ResourceType::Topic,
                format!("team-{}-", (i / 10) % 500),
                PatternType::Prefixed,
                AclOperation::Read,
                AclPermission::Allow,
            ),
            7 => (
                ResourceType::Group,
                format!("group-{i}"),
                PatternType::Literal,
                AclOperation::Read,
                AclPermission::Allow,
            ),
            8 => (
                ResourceType::Topic,
                format!("team-{}-secret", (i / 10) % 500),
                PatternType::Prefixed,
                AclOperation::Read,
                AclPermission::Deny,
            ),
            _ => (
                ResourceType::Topic,
                format!("topic-{i}"),
                PatternType::Literal,
                AclOperation::Read,
                AclPermission::Allow,
            ),
        };
        out.push(b(t, name, pt, who, op, perm));
        i += 1;
    }
    out
}

fn context(principal: &str) -> RequestContext {
    RequestContext {
        principal: principal.into(),
        listener: "CLIENT".into(),
        security_protocol: "SASL_SSL".into(),
        sasl_mechanism: RNone,
        client_address: "10.1.2.3".into(),
        client_id: "bench".into(),
        api_key: 0,
        api_version: 11,
        correlation_id: 1,
    }
}

fn action(name: &str, op: AclOperation) -> Action {
    Action {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        operation: op,
        reference_count: 1,
        log_if_allowed: true,
        log_if_denied: true,
    }
}

fn authorize(c: &mut Criterion) {
    let mut g = c.benchmark_group("authorize");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut any = Vec::new();
    for n in [10usize, 1_000, 100_000] {
        let dir = PluginDir::new();
        let path = dir.add_built("drover_authorizer_acl");
        let plugin = dir
            .loader()
            .load(&path, Some(PluginKind::Authorizer))
            .unwrap_or_else(|e| panic!("{e}"));
        let config = format!("path = {:?}", dir.scratch("acls"));
        let authorizer = plugin
            .new_authorizer(&config, None)
            .unwrap_or_else(|e| panic!("{e}"));
        for r in authorizer.create_acls(bindings(n)).unwrap() {
            assert!(r.is_none(), "{r:?}");
        }
        // u0: WRITE on topic-0, READ on topic-9 and on team-0-*, but not team-0-secret*.
        let alice = context("User:u0");
        let produce = [action("topic-0", AclOperation::Write)];
        assert!(authorizer.authorize(&alice, &produce).unwrap()[0].is_allowed());
        g.bench_function(BenchmarkId::new("produce", n), |b| {
            b.iter(|| authorizer.authorize(&alice, &produce).unwrap())
        });
        let fetch: Vec<Action> = (0..10)
            .map(|k| {
                let name = if k % 2 == 0 {
                    format!("team-0-part-{k}")
                } else {
                    "topic-9".to_owned()
                };
                action(&name, AclOperation::Read)
            })
            .collect();
        let d = authorizer.authorize(&alice, &fetch).unwrap();
        assert!(d.iter().all(|d| d.is_allowed()), "{d:?}");
        g.bench_function(BenchmarkId::new("fetch-10", n), |b| {
            b.iter(|| authorizer.authorize(&alice, &fetch).unwrap())
        });
        let denied = [action("team-0-secret-x", AclOperation::Read)];
        assert!(!authorizer.authorize(&alice, &denied).unwrap()[0].is_allowed());
        g.bench_function(BenchmarkId::new("denied", n), |b| {
            b.iter(|| authorizer.authorize(&alice, &denied).unwrap())
        });
        any.push((n, dir, plugin, authorizer));
    }
    g.finish();
    let mut g = c.benchmark_group("authorize_any");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (n, _dir, _plugin, authorizer) in &any {
        let alice = context("User:u0");
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                authorizer
                    .authorize_any(&alice, ResourceType::Topic, AclOperation::Write)
                    .unwrap()
            })
        });
    }
    g.finish();
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, authorize);
}
criterion_main!(group::benches);
