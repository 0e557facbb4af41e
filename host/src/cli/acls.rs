//! `drover admin acls`: ACLs through a running broker's Kafka listener (`--bootstrap
//! HOST:PORT`), with Kafka's DescribeAcls, CreateAcls and DeleteAcls, as `kafka-acls.sh`
//! sends them — standalone or in cluster mode (the authorizer keeps them; with the `acl`
//! plugin every broker follows). Plain TCP: the listener must not require SASL or TLS
//! (a PLAINTEXT listener on loopback kept for administration, whose principal the
//! authorizer must allow Describe or Alter on the cluster: a super user).

use drover_host::authz::{AclOperation, AclPermission, PatternType, ResourceType};
use kafka_protocol::{
    error::ResponseError,
    messages::{
        create_acls_request::AclCreation, delete_acls_request::DeleteAclsFilter, ApiKey,
        CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
        DescribeAclsRequest, DescribeAclsResponse,
    },
    protocol::{Decodable, StrBytes},
};

use super::users::call;

/// The version of the ACL APIs this client speaks (Kafka 4.1 serves 1–3).
const VERSION: i16 = 2;

/// The resource an ACL is on, as the command line names it.
#[derive(Debug, Clone, Default)]
pub struct Resource {
    /// `--topic`.
    pub topic: Option<String>,
    /// `--group`.
    pub group: Option<String>,
    /// `--transactional-id`.
    pub transactional_id: Option<String>,
    /// `--cluster`.
    pub cluster: bool,
    /// `--pattern` (`literal`, `prefixed`; `any` and `match` for list and remove).
    pub pattern: Option<String>,
}

impl Resource {
    /// (type, name): the one resource named, `None` when none is, an error for several.
    fn named(&self) -> Result<Option<(ResourceType, String)>, String> {
        let mut found = Vec::new();
        if let Some(t) = &self.topic {
            found.push((ResourceType::Topic, t.clone()));
        }
        if let Some(g) = &self.group {
            found.push((ResourceType::Group, g.clone()));
        }
        if let Some(t) = &self.transactional_id {
            found.push((ResourceType::TransactionalId, t.clone()));
        }
        if self.cluster {
            found.push((
                ResourceType::Cluster,
                drover_host::authz::CLUSTER_RESOURCE_NAME.to_owned(),
            ));
        }
        match found.len() {
            0 => Ok(None),
            1 => Ok(found.pop()),
            _ => Err("name one resource: --topic, --group, --transactional-id or --cluster".into()),
        }
    }

    fn pattern(&self, default: PatternType) -> Result<PatternType, String> {
        match &self.pattern {
            None => Ok(default),
            Some(p) => PatternType::from_name(p)
                .filter(|p| !matches!(*p, PatternType::Unknown))
                .ok_or_else(|| format!("--pattern {p}: expected literal, prefixed, any or match")),
        }
    }
}

/// One ACL's entry, as the command line gives it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `--principal` (`User:alice`, `User:*`).
    pub principal: Option<String>,
    /// `--host` (`*` when absent for add).
    pub host: Option<String>,
    /// `--operation` (`read`, `write`, `describe`, `all`, ...).
    pub operation: Option<String>,
    /// `--deny`: a DENY entry (else ALLOW).
    pub deny: bool,
}

/// What to do.
#[derive(Debug, Clone)]
pub enum Action {
    /// List the ACLs matching the resource and entry given (all when none is).
    List(Resource, Entry),
    /// Add one ACL.
    Add(Resource, Entry),
    /// Remove the ACLs matching exactly what is given (unset fields match any).
    Remove(Resource, Entry),
}

fn operation(name: Option<&str>, default: AclOperation) -> Result<AclOperation, String> {
    match name {
        None => Ok(default),
        Some(n) => AclOperation::from_name(n)
            .filter(|o| !matches!(*o, AclOperation::Unknown))
            .ok_or_else(|| {
                format!("--operation {n}: not an ACL operation (read, write, describe, all, ...)")
            }),
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn name_of<T: std::fmt::Debug>(v: T) -> String {
    format!("{v:?}")
}

/// Runs `action` against the broker at `bootstrap`.
pub fn run(bootstrap: &str, action: Action) -> Result<(), String> {
    match action {
        Action::List(resource, entry) => {
            let (resource_type, name) = resource
                .named()?
                .map_or((ResourceType::Any, None), |(t, n)| (t, Some(n)));
            let mut r = DescribeAclsRequest::default();
            r.resource_type_filter = resource_type.code();
            r.resource_name_filter = name.as_deref().map(text);
            r.pattern_type_filter = resource.pattern(PatternType::Any)?.code();
            r.principal_filter = entry.principal.as_deref().map(text);
            r.host_filter = entry.host.as_deref().map(text);
            r.operation = operation(entry.operation.as_deref(), AclOperation::Any)?.code();
            r.permission_type = AclPermission::Any.code();
            let body = call(bootstrap, ApiKey::DescribeAcls, VERSION, &r)?;
            let response = DescribeAclsResponse::decode(&mut body.clone(), VERSION)
                .map_err(|e| format!("bad DescribeAcls response: {e}"))?;
            check(response.error_code, response.error_message.as_deref())?;
            for resource in response.resources {
                for a in resource.acls {
                    println!(
                        "{} {} {} from {} on {} {} ({})",
                        name_of(AclPermission::from_code(a.permission_type)),
                        a.principal.as_str(),
                        name_of(AclOperation::from_code(a.operation)),
                        a.host.as_str(),
                        name_of(ResourceType::from_code(resource.resource_type)),
                        resource.resource_name.as_str(),
                        name_of(PatternType::from_code(resource.pattern_type)),
                    );
                }
            }
            Ok(())
        }
        Action::Add(resource, entry) => {
            let (resource_type, name) = resource
                .named()?
                .ok_or("name the resource: --topic, --group, --transactional-id or --cluster")?;
            let principal = entry
                .principal
                .ok_or("--principal is required (User:NAME)")?;
            let mut c = AclCreation::default();
            c.resource_type = resource_type.code();
            c.resource_name = text(&name);
            c.resource_pattern_type = resource.pattern(PatternType::Literal)?.code();
            c.principal = text(&principal);
            c.host = text(entry.host.as_deref().unwrap_or("*"));
            c.operation = operation(entry.operation.as_deref(), AclOperation::Unknown)?.code();
            if c.operation == AclOperation::Unknown.code() {
                return Err("--operation is required".into());
            }
            c.permission_type = if entry.deny {
                AclPermission::Deny
            } else {
                AclPermission::Allow
            }
            .code();
            let mut r = CreateAclsRequest::default();
            r.creations = vec![c];
            let body = call(bootstrap, ApiKey::CreateAcls, VERSION, &r)?;
            let response = CreateAclsResponse::decode(&mut body.clone(), VERSION)
                .map_err(|e| format!("bad CreateAcls response: {e}"))?;
            for result in &response.results {
                check(result.error_code, result.error_message.as_deref())?;
            }
            println!("added");
            Ok(())
        }
        Action::Remove(resource, entry) => {
            let (resource_type, name) = resource
                .named()?
                .map_or((ResourceType::Any, None), |(t, n)| (t, Some(n)));
            let mut f = DeleteAclsFilter::default();
            f.resource_type_filter = resource_type.code();
            f.resource_name_filter = name.as_deref().map(text);
            f.pattern_type_filter = resource.pattern(PatternType::Literal)?.code();
            f.principal_filter = entry.principal.as_deref().map(text);
            f.host_filter = entry.host.as_deref().map(text);
            f.operation = operation(entry.operation.as_deref(), AclOperation::Any)?.code();
            f.permission_type = if entry.deny {
                AclPermission::Deny
            } else {
                AclPermission::Any
            }
            .code();
            let mut r = DeleteAclsRequest::default();
            r.filters = vec![f];
            let body = call(bootstrap, ApiKey::DeleteAcls, VERSION, &r)?;
            let response = DeleteAclsResponse::decode(&mut body.clone(), VERSION)
                .map_err(|e| format!("bad DeleteAcls response: {e}"))?;
            let mut removed = 0;
            for result in &response.filter_results {
                check(result.error_code, result.error_message.as_deref())?;
                removed += result.matching_acls.len();
            }
            println!("removed {removed}");
            Ok(())
        }
    }
}

fn check(code: i16, message: Option<&str>) -> Result<(), String> {
    if code == 0 {
        return Ok(());
    }
    let name =
        ResponseError::try_from_code(code).map_or_else(|| code.to_string(), |e| format!("{e:?}"));
    Err(match message {
        Some(m) if !m.is_empty() => format!("{name}: {m}"),
        _ => name,
    })
}
