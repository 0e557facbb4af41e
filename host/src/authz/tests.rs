use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::{Arc, Mutex},
};

use drover_abi::{ErrorKind, PluginError};

use super::{
    context::{build, Caller, RequestHead},
    *,
};

/// What the fake answers.
#[derive(Clone, Copy)]
enum Mode {
    /// Allows every action on a resource whose name starts with `ok`.
    Names,
    Error,
    Panicked,
    OutOfService,
    /// One decision too few.
    Short,
}

struct Fake {
    mode: Mode,
    seen: Mutex<Vec<Action>>,
}

impl Fake {
    fn new(mode: Mode) -> Arc<Fake> {
        Arc::new(Fake {
            mode,
            seen: Mutex::new(Vec::new()),
        })
    }

    fn fail(&self) -> CallError {
        match self.mode {
            Mode::OutOfService => CallError::OutOfService {
                plugin: "fake".into(),
            },
            Mode::Panicked => CallError::Plugin {
                plugin: "fake".into(),
                error: PluginError::new(ErrorKind::Panicked, "boom"),
            },
            _ => CallError::Plugin {
                plugin: "fake".into(),
                error: PluginError::new(ErrorKind::Internal, "no"),
            },
        }
    }
}

impl Authorizer for Fake {
    fn authorize(
        &self,
        _context: &RequestContext,
        actions: &[Action],
    ) -> Result<Vec<Decision>, CallError> {
        self.seen.lock().unwrap().extend_from_slice(actions);
        let decide = |a: &Action| Decision::allowed_if(a.resource_name.starts_with("ok"));
        match self.mode {
            Mode::Names => Ok(actions.iter().map(decide).collect()),
            Mode::Short => Ok(actions.iter().skip(1).map(decide).collect()),
            _ => Err(self.fail()),
        }
    }
    fn authorize_any(
        &self,
        _context: &RequestContext,
        resource_type: ResourceType,
        _operation: AclOperation,
    ) -> Result<Decision, CallError> {
        match self.mode {
            Mode::Names => Ok(Decision::allowed_if(resource_type == ResourceType::Topic)),
            _ => Err(self.fail()),
        }
    }
    fn acls(&self, _filter: &AclBindingFilter) -> Result<Vec<AclBinding>, CallError> {
        Err(self.fail())
    }
    fn create_acls(&self, _b: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, CallError> {
        Err(self.fail())
    }
    fn delete_acls(&self, _f: Vec<AclBindingFilter>) -> Result<Vec<AclDeleteResult>, CallError> {
        Err(self.fail())
    }
}

fn context() -> RequestContext {
    build(
        &Caller {
            principal: "User:alice",
            listener: "CLIENT",
            security_protocol: "SASL_SSL",
            sasl_mechanism: Some("SCRAM-SHA-512"),
            client_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        },
        &RequestHead {
            client_id: Some("app"),
            api_key: 0,
            api_version: 9,
            correlation_id: 42,
        },
    )
}

fn authz(fake: &Arc<Fake>) -> (Authz, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let instance: Arc<dyn Authorizer> = fake.clone();
    (
        Authz::new("fake", instance, Arc::clone(&metrics), 1000),
        metrics,
    )
}

/// A request's checks by an authorizer that allows every action on a resource whose
/// name starts with `ok` (for other modules' tests).
pub(crate) fn ok_prefix_checks() -> RequestAuthz {
    let (authz, _) = authz(&Fake::new(Mode::Names));
    authz.request("test", context)
}

fn rendered(metrics: &Metrics) -> String {
    metrics.render(&[])
}

#[test]
fn the_context_carries_the_connection_and_the_request() {
    let c = context();
    assert_eq!(c.principal.as_str(), "User:alice");
    assert_eq!(c.listener.as_str(), "CLIENT");
    assert_eq!(c.security_protocol.as_str(), "SASL_SSL");
    assert_eq!(
        c.sasl_mechanism.as_ref().map(|m| m.as_str()).into_option(),
        Some("SCRAM-SHA-512")
    );
    assert_eq!(c.client_address.as_str(), "127.0.0.1");
    assert_eq!(c.client_id.as_str(), "app");
    assert_eq!((c.api_key, c.api_version, c.correlation_id), (0, 9, 42));
    // An IPv4 client on a dual-stack socket is given as IPv4.
    let mapped = build(
        &Caller {
            principal: "User:ANONYMOUS",
            listener: "PLAINTEXT",
            security_protocol: "PLAINTEXT",
            sasl_mechanism: None,
            client_address: IpAddr::V6(Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped()),
        },
        &RequestHead {
            client_id: None,
            api_key: 3,
            api_version: 12,
            correlation_id: 1,
        },
    );
    assert_eq!(mapped.client_address.as_str(), "10.1.2.3");
    assert_eq!(mapped.client_id.as_str(), "");
    assert!(mapped.sasl_mechanism.is_none());
    let v6 = build(
        &Caller {
            client_address: IpAddr::V6(Ipv6Addr::LOCALHOST),
            principal: "User:a",
            listener: "L",
            security_protocol: "SSL",
            sasl_mechanism: None,
        },
        &RequestHead {
            client_id: None,
            api_key: 3,
            api_version: 12,
            correlation_id: 1,
        },
    );
    assert_eq!(v6.client_address.as_str(), "::1");
}

#[test]
fn without_an_authorizer_everything_is_allowed_and_nothing_is_built() {
    let authz = Authz::disabled(Arc::new(Metrics::new()));
    let mut built = false;
    let request = authz.request("Produce", || {
        built = true;
        context()
    });
    assert!(!built);
    assert!(!request.is_enabled());
    assert!(request.allows(ResourceType::Topic, "t", AclOperation::Write));
    assert!(request.allows_any(ResourceType::Topic, AclOperation::Write));
    assert_eq!(
        request.allowed_names(ResourceType::Topic, AclOperation::Read, ["a", "b"]),
        Allowed::All
    );
    // KIP-430 without an authorizer: every supported operation, as Kafka.
    assert_eq!(
        request.authorized_operations(ResourceType::TransactionalId, "x"),
        (1 << 8) | (1 << 4)
    );
}

#[test]
fn decisions_come_from_the_authorizer_and_are_counted() {
    let fake = Fake::new(Mode::Names);
    let (authz, metrics) = authz(&fake);
    let request = authz.request("Produce", context);
    assert!(request.allows(ResourceType::Topic, "ok-1", AclOperation::Write));
    assert!(!request.allows(ResourceType::Topic, "secret", AclOperation::Write));
    assert_eq!(
        request.context().map(|c| c.correlation_id),
        Some(42),
        "the request's context reaches the authorizer"
    );
    let text = rendered(&metrics);
    assert!(
        text.contains(r#"drover_authorizer_decisions_total{api="Produce",decision="allowed"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"drover_authorizer_decisions_total{api="Produce",decision="denied"} 1"#),
        "{text}"
    );
}

#[test]
fn names_are_asked_once_each_with_their_reference_count() {
    let fake = Fake::new(Mode::Names);
    let (authz, _) = authz(&fake);
    let request = authz.request("Fetch", context);
    let allowed = request.allowed_names(
        ResourceType::Topic,
        AclOperation::Read,
        ["ok-a", "no", "ok-a", "ok-b", "no"],
    );
    assert!(allowed.contains("ok-a") && allowed.contains("ok-b") && !allowed.contains("no"));
    let seen = fake.seen.lock().unwrap();
    let asked: Vec<(&str, u32)> = seen
        .iter()
        .map(|a| (a.resource_name.as_str(), a.reference_count))
        .collect();
    assert_eq!(asked, [("ok-a", 2), ("no", 2), ("ok-b", 1)]);
    assert!(seen.iter().all(|a| a.pattern_type == PatternType::Literal));
}

#[test]
fn every_failure_denies_and_is_counted_by_reason() {
    for (mode, reason) in [
        (Mode::Error, "error"),
        (Mode::Panicked, "panicked"),
        (Mode::OutOfService, "out_of_service"),
        (Mode::Short, "error"),
    ] {
        let fake = Fake::new(mode);
        let (authz, metrics) = authz(&fake);
        let request = authz.request("Metadata", context);
        assert!(!request.allows(ResourceType::Topic, "ok-1", AclOperation::Describe));
        assert_eq!(
            request.allowed_names(
                ResourceType::Topic,
                AclOperation::Describe,
                ["ok-1", "ok-2"]
            ),
            Allowed::Only(Default::default())
        );
        assert!(!request.allows_any(ResourceType::Topic, AclOperation::Write));
        assert_eq!(
            request.authorized_operations(ResourceType::Topic, "ok-1"),
            0
        );
        let text = rendered(&metrics);
        let want = format!(r#"drover_authorizer_errors_total{{reason="{reason}"}}"#);
        assert!(text.contains(&want), "{want} in {text}");
        assert!(text.contains(r#"decision="denied""#), "{text}");
    }
}

#[test]
fn authorize_any_and_authorized_operations() {
    let fake = Fake::new(Mode::Names);
    let (authz, _) = authz(&fake);
    let request = authz.request("InitProducerId", context);
    assert!(request.allows_any(ResourceType::Topic, AclOperation::Write));
    assert!(!request.allows_any(ResourceType::Group, AclOperation::Read));
    let all = operations_bits(supported_operations(ResourceType::Topic).iter().copied());
    assert_eq!(
        request.authorized_operations(ResourceType::Topic, "ok-t"),
        all
    );
    assert_eq!(request.authorized_operations(ResourceType::Topic, "t"), 0);
    // Kafka's bit field: READ (3) and DESCRIBE (8).
    assert_eq!(
        operations_bits([AclOperation::Read, AclOperation::Describe]),
        (1 << 3) | (1 << 8)
    );
}

#[test]
fn a_replaced_instance_decides_from_the_next_request() {
    let denying = Fake::new(Mode::Error);
    let (authz, _) = authz(&denying);
    let before = authz.request("Produce", context);
    authz.replace(Fake::new(Mode::Names));
    let after = authz.request("Produce", context);
    assert!(!before.allows(ResourceType::Topic, "ok", AclOperation::Write));
    assert!(after.allows(ResourceType::Topic, "ok", AclOperation::Write));
}

#[tokio::test]
async fn acl_calls_without_acls_are_security_disabled() {
    let disabled = Authz::disabled(Arc::new(Metrics::new()));
    let e = disabled
        .acl_call(|a| a.acls(&filter_all()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), 54);
    let fake = Fake::new(Mode::Error);
    let (authz, _) = authz(&fake);
    let e = authz.acl_call(|a| a.acls(&filter_all())).await.unwrap_err();
    assert_eq!(e.code(), -1);
}

#[tokio::test]
async fn an_acl_call_past_its_budget_times_out() {
    struct Slow;
    impl Authorizer for Slow {
        fn authorize(&self, _: &RequestContext, a: &[Action]) -> Result<Vec<Decision>, CallError> {
            Ok(vec![Decision::DENIED; a.len()])
        }
        fn authorize_any(
            &self,
            _: &RequestContext,
            _: ResourceType,
            _: AclOperation,
        ) -> Result<Decision, CallError> {
            Ok(Decision::DENIED)
        }
        fn acls(&self, _: &AclBindingFilter) -> Result<Vec<AclBinding>, CallError> {
            std::thread::sleep(std::time::Duration::from_millis(300));
            Ok(Vec::new())
        }
        fn create_acls(&self, _: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, CallError> {
            Ok(Vec::new())
        }
        fn delete_acls(&self, _: Vec<AclBindingFilter>) -> Result<Vec<AclDeleteResult>, CallError> {
            Ok(Vec::new())
        }
    }
    let metrics = Arc::new(Metrics::new());
    let authz = Authz::new("slow", Arc::new(Slow), Arc::clone(&metrics), 20);
    let e = authz.acl_call(|a| a.acls(&filter_all())).await.unwrap_err();
    assert_eq!(e.code(), 7);
    assert!(rendered(&metrics).contains(r#"drover_authorizer_errors_total{reason="timeout"} 1"#));
}

fn filter_all() -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::Any,
        name: None.into(),
        pattern_type: PatternType::Any,
        principal: None.into(),
        host: None.into(),
        operation: AclOperation::Any,
        permission: AclPermission::Any,
    }
}
