//! The authorizer properties (listed in the module docs of [`super`]).

use drover_abi::{
    authorizer::{
        AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission, Action,
        AuthorizerArc, Decision, PatternType, RequestContext, ResourcePattern, ResourceType,
        CLUSTER_RESOURCE_NAME, WILDCARD,
    },
    std_types::{RNone, RSlice, RSome, RVec},
    ErrorKind,
};
use proptest::{collection::vec, strategy::Strategy};

use super::Options;
use crate::{check::check, offset_store::unique_prefix, Report, Verdict};

/// The resource types an action can name.
const TYPES: [ResourceType; 6] = [
    ResourceType::Topic,
    ResourceType::Group,
    ResourceType::Cluster,
    ResourceType::TransactionalId,
    ResourceType::DelegationToken,
    ResourceType::User,
];

/// The operations an action can ask about (ALL, ANY and UNKNOWN are for bindings and
/// filters).
const OPERATIONS: [AclOperation; 13] = [
    AclOperation::Read,
    AclOperation::Write,
    AclOperation::Create,
    AclOperation::Delete,
    AclOperation::Alter,
    AclOperation::Describe,
    AclOperation::ClusterAction,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
    AclOperation::IdempotentWrite,
    AclOperation::CreateTokens,
    AclOperation::DescribeTokens,
    AclOperation::TwoPhaseCommit,
];

pub(super) fn run(authorizer: &AuthorizerArc, options: &Options) -> Report {
    let authz = Authz(authorizer);
    let prefix = unique_prefix();
    let me = options.principal.as_str();
    let mut report = Report::new("authorizer");
    let acls = authz.keeps_acls(&prefix);

    report.record(
        "one_decision_per_action",
        one_decision_per_action(&authz, me, &prefix),
    );
    let mix = mixed_acls(me, &prefix);
    report.record(
        "in_order",
        with_acls(&authz, &acls, &mix, || in_order(&authz, options, &prefix)),
    );
    report.record(
        "deterministic",
        with_acls(&authz, &acls, &mix, || {
            deterministic(&authz, options, &prefix)
        }),
    );
    let name = format!("{prefix}-unknown");
    let allow_all = [
        binding(
            ResourceType::Topic,
            &name,
            PatternType::Literal,
            me,
            AclOperation::All,
            true,
        ),
        binding(
            ResourceType::Group,
            &name,
            PatternType::Literal,
            me,
            AclOperation::All,
            true,
        ),
    ];
    report.record(
        "denies_unknown_codes",
        with_acls(&authz, &acls, &allow_all, || {
            denies_unknown_codes(&authz, me, &name, matches!(acls, Ok(true)))
        }),
    );
    match &options.super_user {
        Some(su) => {
            let deny_all = [binding(
                ResourceType::Topic,
                &prefix,
                PatternType::Prefixed,
                su,
                AclOperation::All,
                false,
            )];
            report.record(
                "super_user",
                with_acls(&authz, &acls, &deny_all, || super_user(&authz, su, &prefix)),
            );
        }
        None => report.push(
            "super_user",
            Verdict::Skip(
                "no super user given (name a principal the config makes a super user: \
                 `--super-user PRINCIPAL`, `Options::super_user`)"
                    .into(),
            ),
        ),
    }
    match &acls {
        Ok(true) => {
            report.record("acl_round_trip", acl_round_trip(&authz, me, &prefix));
            report.record("deny_beats_allow", deny_beats_allow(&authz, me, &prefix));
        }
        Ok(false) => {
            for property in ["acl_round_trip", "deny_beats_allow"] {
                let why = "the authorizer keeps no ACLs (`acls` answered Unsupported)";
                report.push(property, Verdict::Skip(why.into()));
            }
        }
        Err(why) => {
            report.record("acl_round_trip", Err(why.clone()));
            report.record("deny_beats_allow", Err(why.clone()));
        }
    }
    report
}

/// The authorizer's calls, with the contract's counts checked and errors as sentences.
struct Authz<'a>(&'a AuthorizerArc);

impl Authz<'_> {
    fn authorize(&self, principal: &str, actions: &[Action]) -> Result<Vec<Decision>, String> {
        let got = self
            .0
            .authorize(&context(principal), RSlice::from_slice(actions))
            .into_result()
            .map_err(|e| format!("authorize failed for {principal}: {e}"))?;
        if got.len() != actions.len() {
            return Err(format!(
                "authorize answered {} decisions for {} actions",
                got.len(),
                actions.len()
            ));
        }
        Ok(got.into_vec())
    }

    fn one(&self, principal: &str, action: &Action) -> Result<Decision, String> {
        Ok(self.authorize(principal, std::slice::from_ref(action))?[0])
    }

    fn any(&self, principal: &str, rt: ResourceType, op: AclOperation) -> Result<Decision, String> {
        self.0
            .authorize_any(&context(principal), rt, op)
            .into_result()
            .map_err(|e| format!("authorize_any({rt}, {op}) failed for {principal}: {e}"))
    }

    /// `Ok(true)` when `acls` answers, `Ok(false)` when it is Unsupported.
    fn keeps_acls(&self, prefix: &str) -> Result<bool, String> {
        let probe = exact(&binding(
            ResourceType::Topic,
            prefix,
            PatternType::Literal,
            "User:*",
            AclOperation::Read,
            true,
        ));
        match self.0.acls(&probe).into_result() {
            Ok(_) => Ok(true),
            Err(e) if e.kind == ErrorKind::Unsupported => Ok(false),
            Err(e) => Err(format!("acls failed: {e}")),
        }
    }

    fn acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, String> {
        let got = self.0.acls(filter).into_result();
        got.map(RVec::into_vec)
            .map_err(|e| format!("acls failed: {e}"))
    }

    fn create(&self, bindings: &[AclBinding]) -> Result<(), String> {
        let got = self
            .0
            .create_acls(RVec::from(bindings.to_vec()))
            .into_result()
            .map_err(|e| format!("create_acls failed: {e}"))?;
        if got.len() != bindings.len() {
            return Err(format!(
                "create_acls answered {} results for {} bindings",
                got.len(),
                bindings.len()
            ));
        }
        match bindings.iter().zip(&got).find(|(_, r)| r.is_some()) {
            Some((b, RSome(e))) => Err(format!("create_acls refused {}: {e}", show(b))),
            _ => Ok(()),
        }
    }

    /// Deletes exactly `bindings`; what each exact filter deleted.
    fn delete(&self, bindings: &[AclBinding]) -> Result<Vec<Vec<AclBinding>>, String> {
        let filters: Vec<AclBindingFilter> = bindings.iter().map(exact).collect();
        let got = self
            .0
            .delete_acls(RVec::from(filters))
            .into_result()
            .map_err(|e| format!("delete_acls failed: {e}"))?;
        if got.len() != bindings.len() {
            return Err(format!(
                "delete_acls answered {} results for {} filters",
                got.len(),
                bindings.len()
            ));
        }
        got.into_iter()
            .map(|r| r.into_result().map(RVec::into_vec))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("delete_acls failed for a filter: {e}"))
    }
}

/// Runs `property` with `bindings` created first (where the authorizer keeps ACLs), and
/// deletes them afterwards whatever happened.
fn with_acls(
    authz: &Authz<'_>,
    acls: &Result<bool, String>,
    bindings: &[AclBinding],
    property: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    if !matches!(acls, Ok(true)) || bindings.is_empty() {
        return property();
    }
    authz.create(bindings)?;
    let result = property();
    let cleanup = authz.delete(bindings);
    result.and(cleanup.map(drop))
}

/// A request context of `principal` from 127.0.0.1 on a PLAINTEXT listener (Produce v9).
pub fn context(principal: &str) -> RequestContext {
    RequestContext {
        principal: principal.into(),
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        sasl_mechanism: RNone,
        client_address: "127.0.0.1".into(),
        client_id: "drover-testkit".into(),
        api_key: 0,
        api_version: 9,
        correlation_id: 1,
    }
}

/// The action `operation` on the resource `name` of `resource_type` (a literal name).
pub fn action(resource_type: ResourceType, name: &str, operation: AclOperation) -> Action {
    Action {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        operation,
        reference_count: 1,
        log_if_allowed: false,
        log_if_denied: false,
    }
}

/// The name of a resource of `rt` under `prefix` (the cluster has one name).
fn name_of(rt: ResourceType, prefix: &str, suffix: &str) -> String {
    if rt == ResourceType::Cluster {
        CLUSTER_RESOURCE_NAME.to_owned()
    } else {
        format!("{prefix}-{suffix}")
    }
}

fn binding(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: AclOperation,
    allow: bool,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        },
        entry: AccessControlEntry {
            principal: principal.into(),
            host: WILDCARD.into(),
            operation,
            permission: if allow {
                AclPermission::Allow
            } else {
                AclPermission::Deny
            },
        },
    }
}

/// The filter that selects exactly `b`.
fn exact(b: &AclBinding) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: b.pattern.resource_type,
        name: RSome(b.pattern.name.clone()),
        pattern_type: b.pattern.pattern_type,
        principal: RSome(b.entry.principal.clone()),
        host: RSome(b.entry.host.clone()),
        operation: b.entry.operation,
        permission: b.entry.permission,
    }
}

fn show(b: &AclBinding) -> String {
    let (p, e) = (&b.pattern, &b.entry);
    format!(
        "{} {} {} on {} {} `{}` from {}",
        e.permission, e.principal, e.operation, p.pattern_type, p.resource_type, p.name, e.host
    )
}

fn show_action(a: &Action) -> String {
    format!(
        "{} on {} {} `{}`",
        a.operation, a.pattern_type, a.resource_type, a.resource_name
    )
}

/// Every known operation on a resource of every known type, `n` of them (cycling).
fn actions(prefix: &str, n: usize) -> Vec<Action> {
    let all = TYPES.iter().flat_map(|&rt| {
        let name = name_of(rt, prefix, "every");
        OPERATIONS.iter().map(move |&op| action(rt, &name, op))
    });
    all.collect::<Vec<_>>()
        .into_iter()
        .cycle()
        .take(n)
        .collect()
}

fn one_decision_per_action(authz: &Authz<'_>, me: &str, prefix: &str) -> Result<(), String> {
    for n in [0, 1, 3, 120] {
        authz.authorize(me, &actions(prefix, n))?;
    }
    Ok(())
}

/// ACLs that make answers differ between actions: ALLOW and DENY, literal and prefixed.
fn mixed_acls(me: &str, prefix: &str) -> Vec<AclBinding> {
    let (read, write) = (AclOperation::Read, AclOperation::Write);
    let topic = |name: &str, pattern, op, allow| {
        binding(
            ResourceType::Topic,
            &format!("{prefix}-{name}"),
            pattern,
            me,
            op,
            allow,
        )
    };
    vec![
        topic("a", PatternType::Prefixed, read, true),
        topic("a", PatternType::Prefixed, write, true),
        topic("a-1", PatternType::Literal, write, false),
        topic("b", PatternType::Literal, read, true),
        binding(
            ResourceType::Group,
            &format!("{prefix}-a"),
            PatternType::Literal,
            me,
            read,
            true,
        ),
    ]
}

/// A principal and a list of actions, as indexes into small tables.
type Case = (usize, Vec<(usize, usize, usize)>);

const SUFFIXES: [&str; 4] = ["a", "a-1", "b", "c"];

fn cases() -> impl Strategy<Value = Case> {
    (
        0..3usize,
        vec(
            (0..TYPES.len(), 0..SUFFIXES.len(), 0..OPERATIONS.len()),
            1..12,
        ),
    )
}

fn principals(options: &Options) -> [String; 3] {
    let su = options.super_user.clone();
    [
        options.principal.clone(),
        su.unwrap_or_else(|| "User:drover-testkit-other".into()),
        "User:drover-testkit-other".into(),
    ]
}

fn realize(options: &Options, prefix: &str, case: &Case) -> (String, Vec<Action>) {
    let principal = principals(options)[case.0].clone();
    let actions = case.1.iter().map(|&(t, s, o)| {
        let rt = TYPES[t];
        action(rt, &name_of(rt, prefix, SUFFIXES[s]), OPERATIONS[o])
    });
    (principal, actions.collect())
}

fn describe(options: &Options, prefix: &str, case: &Case) -> String {
    let (principal, actions) = realize(options, prefix, case);
    let list: Vec<String> = actions.iter().map(show_action).collect();
    format!("{principal} asking [{}]", list.join(", "))
}

fn in_order(authz: &Authz<'_>, options: &Options, prefix: &str) -> Result<(), String> {
    let same_alone = |principal: &str, actions: &[Action]| -> Result<(), String> {
        let together = authz.authorize(principal, actions)?;
        for (i, (a, d)) in actions.iter().zip(&together).enumerate() {
            let alone = authz.one(principal, a)?;
            if alone != *d {
                return Err(format!(
                    "{principal}: action {i} of {} ({}) is {alone:?} asked alone but {d:?} \
                     in the list",
                    actions.len(),
                    show_action(a)
                ));
            }
        }
        Ok(())
    };
    // Every combination once, for each principal: where the answers differ at all, a
    // list answered out of order shows here, whatever proptest generates below.
    let every: Vec<Action> = (0..TYPES.len())
        .flat_map(|t| {
            (0..SUFFIXES.len()).flat_map(move |s| (0..OPERATIONS.len()).map(move |o| (t, s, o)))
        })
        .map(|(t, s, o)| {
            action(
                TYPES[t],
                &name_of(TYPES[t], prefix, SUFFIXES[s]),
                OPERATIONS[o],
            )
        })
        .collect();
    for principal in principals(options) {
        same_alone(&principal, &every)?;
    }
    check(
        options.cases,
        cases(),
        |case| describe(options, prefix, case),
        |case| {
            let (principal, actions) = realize(options, prefix, case);
            same_alone(&principal, &actions)
        },
    )
}

fn deterministic(authz: &Authz<'_>, options: &Options, prefix: &str) -> Result<(), String> {
    check(
        options.cases,
        cases(),
        |case| describe(options, prefix, case),
        |case| {
            let (principal, actions) = realize(options, prefix, case);
            let (first, second) = (
                authz.authorize(&principal, &actions)?,
                authz.authorize(&principal, &actions)?,
            );
            if first != second {
                return Err(format!("asked twice: {first:?}, then {second:?}"));
            }
            for a in &actions {
                let (x, y) = (
                    authz.any(&principal, a.resource_type, a.operation)?,
                    authz.any(&principal, a.resource_type, a.operation)?,
                );
                if x != y {
                    return Err(format!(
                        "authorize_any({}, {}) asked twice: {x:?}, then {y:?}",
                        a.resource_type, a.operation
                    ));
                }
            }
            Ok(())
        },
    )
}

/// Every `i8` code `known` says nothing of, and the filter-only values `extra`.
fn unknown_codes<T>(extra: &[T], known: impl Fn(i8) -> bool, make: impl Fn(i8) -> T) -> Vec<T>
where
    T: Copy,
{
    let undefined = (i8::MIN..=i8::MAX).filter(|&c| !known(c)).map(make);
    extra.iter().copied().chain(undefined).collect()
}

fn denies_unknown_codes(
    authz: &Authz<'_>,
    me: &str,
    name: &str,
    allowed_first: bool,
) -> Result<(), String> {
    let read = action(ResourceType::Topic, name, AclOperation::Read);
    if allowed_first && !authz.one(me, &read)?.is_allowed() {
        return Err(format!(
            "an ALLOW of ALL for {me} on the topic `{name}` did not allow READ on it"
        ));
    }
    let ops = unknown_codes(
        &[AclOperation::Unknown, AclOperation::Any],
        |c| AclOperation::from_code(c).name().is_some(),
        AclOperation::from_code,
    );
    let types = unknown_codes(
        &[ResourceType::Unknown, ResourceType::Any],
        |c| ResourceType::from_code(c).name().is_some(),
        ResourceType::from_code,
    );
    let patterns = unknown_codes(
        &[PatternType::Unknown, PatternType::Any, PatternType::Match],
        |c| PatternType::from_code(c).name().is_some(),
        PatternType::from_code,
    );
    let mut asked: Vec<Action> = Vec::new();
    asked.extend(ops.iter().map(|&op| action(ResourceType::Topic, name, op)));
    asked.extend(types.iter().map(|&rt| action(rt, name, AclOperation::Read)));
    asked.extend(patterns.iter().map(|&pattern_type| Action {
        pattern_type,
        ..read.clone()
    }));
    let decisions = authz.authorize(me, &asked)?;
    if let Some((a, _)) = asked.iter().zip(&decisions).find(|(_, d)| d.is_allowed()) {
        return Err(format!(
            "{me} was allowed {} (an unknown code)",
            show_action(a)
        ));
    }
    let any = types
        .iter()
        .map(|&rt| (rt, AclOperation::Read))
        .chain(ops.iter().map(|&op| (ResourceType::Topic, op)));
    for (rt, op) in any {
        if authz.any(me, rt, op)?.is_allowed() {
            return Err(format!(
                "authorize_any({rt}, {op}) allowed {me} (an unknown code)"
            ));
        }
    }
    Ok(())
}

fn super_user(authz: &Authz<'_>, su: &str, prefix: &str) -> Result<(), String> {
    let all = actions(prefix, TYPES.len() * OPERATIONS.len());
    let decisions = authz.authorize(su, &all)?;
    let denied: Vec<String> = all
        .iter()
        .zip(&decisions)
        .filter(|(_, d)| !d.is_allowed())
        .map(|(a, _)| show_action(a))
        .collect();
    if !denied.is_empty() {
        return Err(format!(
            "super user {su} was denied {} of {} actions, e.g. {}",
            denied.len(),
            all.len(),
            denied[0]
        ));
    }
    for rt in TYPES {
        for op in OPERATIONS {
            if !authz.any(su, rt, op)?.is_allowed() {
                return Err(format!("authorize_any({rt}, {op}) denied super user {su}"));
            }
        }
    }
    Ok(())
}

fn acl_round_trip(authz: &Authz<'_>, me: &str, prefix: &str) -> Result<(), String> {
    let name = format!("{prefix}-rt");
    let bindings = vec![
        binding(
            ResourceType::Topic,
            &name,
            PatternType::Literal,
            me,
            AclOperation::Read,
            true,
        ),
        binding(
            ResourceType::Topic,
            &name,
            PatternType::Prefixed,
            me,
            AclOperation::Write,
            false,
        ),
        binding(
            ResourceType::Group,
            &name,
            PatternType::Literal,
            me,
            AclOperation::All,
            true,
        ),
        binding(
            ResourceType::Topic,
            &name,
            PatternType::Literal,
            "User:*",
            AclOperation::Describe,
            true,
        ),
    ];
    authz.create(&bindings)?;
    // Created again: "created (or already present)", and listed once.
    authz.create(&bindings[..1])?;
    let result = (|| {
        for b in &bindings {
            let got = authz.acls(&exact(b))?;
            if got.as_slice() != std::slice::from_ref(b) {
                return Err(format!("acls for exactly {} returned {got:?}", show(b)));
            }
        }
        let by_name = AclBindingFilter {
            resource_type: ResourceType::Any,
            principal: RNone,
            host: RNone,
            pattern_type: PatternType::Any,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
            ..exact(&bindings[0])
        };
        let got = authz.acls(&by_name)?;
        if got.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("acls returned bindings out of order: {got:?}"));
        }
        if !bindings.iter().all(|b| got.contains(b)) || got.len() != bindings.len() {
            return Err(format!(
                "acls for every binding on `{name}` returned {} of the {} created: {got:?}",
                got.len(),
                bindings.len()
            ));
        }
        Ok(())
    })();
    let deleted = authz.delete(&bindings)?;
    result?;
    for (b, d) in bindings.iter().zip(&deleted) {
        if d.as_slice() != std::slice::from_ref(b) {
            return Err(format!("delete_acls for exactly {} deleted {d:?}", show(b)));
        }
    }
    for b in &bindings {
        let left = authz.acls(&exact(b))?;
        if !left.is_empty() {
            return Err(format!("{} is still there after delete_acls", show(b)));
        }
    }
    Ok(())
}

fn deny_beats_allow(authz: &Authz<'_>, me: &str, prefix: &str) -> Result<(), String> {
    let (all, read_op) = (AclOperation::All, AclOperation::Read);
    let topic = format!("{prefix}-dba-orders");
    let read = action(ResourceType::Topic, &topic, read_op);
    let allow = binding(
        ResourceType::Topic,
        &topic,
        PatternType::Literal,
        me,
        read_op,
        true,
    );
    let t = ResourceType::Topic;
    let mut host = binding(t, &topic, PatternType::Literal, me, read_op, false);
    host.entry.host = "127.0.0.1".into();
    let denies = [
        binding(t, &topic, PatternType::Literal, me, read_op, false),
        binding(t, &topic, PatternType::Literal, me, all, false),
        binding(
            t,
            &format!("{prefix}-dba"),
            PatternType::Prefixed,
            me,
            read_op,
            false,
        ),
        binding(t, WILDCARD, PatternType::Literal, me, read_op, false),
        binding(t, &topic, PatternType::Literal, "User:*", read_op, false),
        host,
    ];
    let expect = |allowed: bool, after: &str| -> Result<(), String> {
        let got = authz.one(me, &read)?;
        if got.is_allowed() == allowed {
            return Ok(());
        }
        Err(format!(
            "{me} READ on topic `{topic}` is {got:?} after {after}"
        ))
    };
    with_acls(authz, &Ok(true), std::slice::from_ref(&allow), || {
        expect(true, &format!("creating {}", show(&allow)))?;
        for deny in &denies {
            let why = format!("creating {} beside {}", show(deny), show(&allow));
            with_acls(authz, &Ok(true), std::slice::from_ref(deny), || {
                expect(false, &why)
            })?;
            expect(true, &format!("deleting {} again", show(deny)))?;
        }
        Ok(())
    })?;
    // The DENY first, then the ALLOW.
    let why = format!("creating {}, then {}", show(&denies[0]), show(&allow));
    with_acls(authz, &Ok(true), &denies[..1], || {
        with_acls(authz, &Ok(true), std::slice::from_ref(&allow), || {
            expect(false, &why)
        })
    })
}
