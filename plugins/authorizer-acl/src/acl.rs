//! ACL bindings and filters as Kafka defines them: which bindings may be created, which
//! filters are valid, what a filter selects, and the stored (JSON) form of a binding.

use drover_abi::{
    authorizer::{
        AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission, PatternType,
        ResourcePattern, ResourceType, CLUSTER_RESOURCE_NAME, WILDCARD,
    },
    std_types::RString,
    PluginError,
};
use serde::{Deserialize, Serialize};

/// The resource types this authorizer keeps ACLs for and decides on; every other type
/// (delegation tokens, users, codes it does not know) is allowed to super users only.
pub const SUPPORTED_TYPES: [ResourceType; 4] = [
    ResourceType::Topic,
    ResourceType::Group,
    ResourceType::Cluster,
    ResourceType::TransactionalId,
];

/// Whether `t` is one of [`SUPPORTED_TYPES`].
pub fn is_supported_type(t: ResourceType) -> bool {
    SUPPORTED_TYPES.contains(&t)
}

/// Whether `op` is an operation a binding may carry: a known code other than `ANY` and
/// `UNKNOWN`.
pub fn is_binding_operation(op: AclOperation) -> bool {
    op.name().is_some() && op != AclOperation::Any && op != AclOperation::Unknown
}

/// Checks that `principal` is `Type:name` with a non-empty type (Kafka parses the
/// principal type up to the first colon).
pub fn check_principal(principal: &str) -> Result<(), String> {
    match principal.split_once(':') {
        Some((kind, _)) if !kind.is_empty() => Ok(()),
        _ => Err(format!(
            "could not parse principal `{principal}`: it must be `Type:name` (e.g. `User:alice`)"
        )),
    }
}

/// Why `binding` cannot be created (Kafka's checks, plus this authorizer's bounds), or
/// `Ok`.
pub fn validate_binding(binding: &AclBinding, max_name_bytes: usize) -> Result<(), PluginError> {
    let p = &binding.pattern;
    let e = &binding.entry;
    let fail = |m: String| Err(PluginError::invalid_input(m));
    if !is_supported_type(p.resource_type) {
        return fail(format!(
            "resource type {} is not supported by authorizer `acl` (TOPIC, GROUP, CLUSTER, \
             TRANSACTIONAL_ID)",
            p.resource_type
        ));
    }
    if p.pattern_type != PatternType::Literal && p.pattern_type != PatternType::Prefixed {
        return fail(format!(
            "invalid pattern type {} (LITERAL or PREFIXED)",
            p.pattern_type
        ));
    }
    if !is_binding_operation(e.operation) {
        return fail(format!("invalid operation {}", e.operation));
    }
    if e.permission != AclPermission::Allow && e.permission != AclPermission::Deny {
        return fail(format!(
            "invalid permission {} (ALLOW or DENY)",
            e.permission
        ));
    }
    if p.name.is_empty() {
        return fail("resource name should not be empty".into());
    }
    if p.resource_type == ResourceType::Cluster && p.name.as_str() != CLUSTER_RESOURCE_NAME {
        return fail(format!(
            "the only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
        ));
    }
    if let Err(m) = check_principal(&e.principal) {
        return fail(m);
    }
    if e.host.is_empty() {
        return fail("host should not be empty (`*` for any host)".into());
    }
    for (what, value) in [
        ("resource name", p.name.as_str()),
        ("principal", e.principal.as_str()),
        ("host", e.host.as_str()),
    ] {
        if value.len() > max_name_bytes {
            return fail(format!(
                "the {what} is {} bytes long, over the limit of {max_name_bytes} (max_name_bytes)",
                value.len()
            ));
        }
    }
    Ok(())
}

/// Why `filter` is not a valid DescribeAcls/DeleteAcls filter (Kafka refuses a filter
/// with an UNKNOWN field; codes this build does not know count as UNKNOWN), or `Ok`.
pub fn validate_filter(filter: &AclBindingFilter) -> Result<(), PluginError> {
    let unknown = |name: Option<&str>| name.is_none_or(|n| n == "UNKNOWN");
    let bad = [
        ("resource type", unknown(filter.resource_type.name())),
        ("pattern type", unknown(filter.pattern_type.name())),
        ("operation", unknown(filter.operation.name())),
        ("permission", unknown(filter.permission.name())),
    ]
    .into_iter()
    .find(|(_, bad)| *bad);
    match bad {
        Some((what, _)) => Err(PluginError::invalid_input(format!(
            "invalid filter: unknown {what}"
        ))),
        None => Ok(()),
    }
}

/// Whether `filter` selects `binding` (Kafka's `AclBindingFilter.matches`).
pub fn filter_matches(filter: &AclBindingFilter, binding: &AclBinding) -> bool {
    pattern_matches(filter, &binding.pattern) && entry_matches(filter, &binding.entry)
}

/// The resource part of [`filter_matches`].
pub fn pattern_matches(filter: &AclBindingFilter, pattern: &ResourcePattern) -> bool {
    if filter.resource_type != ResourceType::Any && filter.resource_type != pattern.resource_type {
        return false;
    }
    if filter.pattern_type != PatternType::Any
        && filter.pattern_type != PatternType::Match
        && filter.pattern_type != pattern.pattern_type
    {
        return false;
    }
    let Some(name) = filter.name.as_ref().into_option() else {
        return true;
    };
    if filter.pattern_type != PatternType::Match {
        return name == &pattern.name;
    }
    match pattern.pattern_type {
        PatternType::Literal => name == &pattern.name || pattern.name.as_str() == WILDCARD,
        PatternType::Prefixed => name.starts_with(pattern.name.as_str()),
        _ => false,
    }
}

/// The entry part of [`filter_matches`].
pub fn entry_matches(filter: &AclBindingFilter, entry: &AccessControlEntry) -> bool {
    filter
        .principal
        .as_ref()
        .into_option()
        .is_none_or(|p| p == &entry.principal)
        && filter
            .host
            .as_ref()
            .into_option()
            .is_none_or(|h| h == &entry.host)
        && (filter.operation == AclOperation::Any || filter.operation == entry.operation)
        && (filter.permission == AclPermission::Any || filter.permission == entry.permission)
}

/// One ACL entry as stored (file and ZooKeeper): codes by their Kafka names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredEntry {
    /// `User:alice`.
    pub principal: String,
    /// `*` or an address.
    pub host: String,
    /// `READ`.
    pub operation: String,
    /// `ALLOW` or `DENY`.
    pub permission: String,
}

impl StoredEntry {
    /// The stored form of `entry`.
    pub fn from_entry(entry: &AccessControlEntry) -> StoredEntry {
        StoredEntry {
            principal: entry.principal.to_string(),
            host: entry.host.to_string(),
            operation: entry.operation.to_string(),
            permission: entry.permission.to_string(),
        }
    }

    /// The entry, or why the stored form is not one.
    pub fn to_entry(&self) -> Result<AccessControlEntry, String> {
        let operation = AclOperation::from_name(&self.operation)
            .filter(|op| is_binding_operation(*op))
            .ok_or_else(|| format!("unknown operation `{}`", self.operation))?;
        let permission = AclPermission::from_name(&self.permission)
            .filter(|p| *p == AclPermission::Allow || *p == AclPermission::Deny)
            .ok_or_else(|| format!("unknown permission `{}`", self.permission))?;
        check_principal(&self.principal)?;
        Ok(AccessControlEntry {
            principal: RString::from(self.principal.as_str()),
            host: RString::from(self.host.as_str()),
            operation,
            permission,
        })
    }
}

/// One ACL binding as stored in the standalone file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredBinding {
    /// `TOPIC`.
    pub resource_type: String,
    /// The name or prefix.
    pub name: String,
    /// `LITERAL` or `PREFIXED`.
    pub pattern_type: String,
    /// Who, from where, what.
    #[serde(flatten)]
    pub entry: StoredEntry,
}

impl StoredBinding {
    /// The stored form of `binding`.
    pub fn from_binding(binding: &AclBinding) -> StoredBinding {
        StoredBinding {
            resource_type: binding.pattern.resource_type.to_string(),
            name: binding.pattern.name.to_string(),
            pattern_type: binding.pattern.pattern_type.to_string(),
            entry: StoredEntry::from_entry(&binding.entry),
        }
    }

    /// The binding, or why the stored form is not one.
    pub fn to_binding(&self) -> Result<AclBinding, String> {
        Ok(AclBinding {
            pattern: stored_pattern(&self.resource_type, &self.pattern_type, &self.name)?,
            entry: self.entry.to_entry()?,
        })
    }
}

/// The resource pattern of stored names, or why they are not one.
pub fn stored_pattern(
    resource_type: &str,
    pattern_type: &str,
    name: &str,
) -> Result<ResourcePattern, String> {
    let resource_type = ResourceType::from_name(resource_type)
        .filter(|t| is_supported_type(*t))
        .ok_or_else(|| format!("unknown resource type `{resource_type}`"))?;
    let pattern_type = PatternType::from_name(pattern_type)
        .filter(|p| *p == PatternType::Literal || *p == PatternType::Prefixed)
        .ok_or_else(|| format!("unknown pattern type `{pattern_type}`"))?;
    if name.is_empty() {
        return Err("empty resource name".into());
    }
    Ok(ResourcePattern {
        resource_type,
        name: RString::from(name),
        pattern_type,
    })
}
