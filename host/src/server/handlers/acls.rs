//! DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1–3 (Kafka 4.1's ranges), as
//! Kafka's `AclApis`: without an authorizer, or with one that keeps no ACLs,
//! SECURITY_DISABLED ("No Authorizer is configured", which Kafka UIs read as ACLs
//! off). Authorization: Describe on the cluster for DescribeAcls, Alter on the cluster
//! for CreateAcls and DeleteAcls, else CLUSTER_AUTHORIZATION_FAILED. A CLUSTER binding
//! not named `kafka-cluster` or a binding with an empty name is INVALID_REQUEST before
//! the plugin sees it; the plugin validates the rest (its refusal: INVALID_REQUEST with
//! its message). The plugin's calls run off the request path within
//! `authorizer.acl_call_timeout_ms` ([`crate::authz::acls`]).

use std::collections::BTreeMap;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        create_acls_response::AclCreationResult,
        delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl},
        describe_acls_response::{AclDescription, DescribeAclsResource},
        CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
        DescribeAclsRequest, DescribeAclsResponse,
    },
    protocol::StrBytes,
};

use crate::{
    authz::{
        acls::AclCallError, AccessControlEntry, AclBinding, AclBindingFilter, AclOperation,
        AclPermission, Authz, PatternType, RequestAuthz, ResourcePattern, ResourceType,
        CLUSTER_RESOURCE_NAME,
    },
    server::reply::Reply,
};

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The refusal before any plugin call: no authorizer (SECURITY_DISABLED) or no
/// permission on the cluster (CLUSTER_AUTHORIZATION_FAILED).
fn refusal(
    authz: &Authz,
    checks: &RequestAuthz,
    operation: AclOperation,
) -> Option<(ResponseError, String)> {
    if !authz.is_enabled() {
        return Some((ResponseError::SecurityDisabled, NO_AUTHORIZER.to_owned()));
    }
    (!checks.allows_cluster(operation)).then(|| {
        (
            ResponseError::ClusterAuthorizationFailed,
            format!("Cluster authorization failed: {operation} on the cluster is not allowed"),
        )
    })
}

fn call_error(e: &AclCallError) -> (ResponseError, String) {
    let error = ResponseError::try_from_code(e.code()).unwrap_or(ResponseError::UnknownServerError);
    (error, e.to_string())
}

/// A filter from the wire's fields.
#[allow(clippy::too_many_arguments)]
fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::from_code(resource_type),
        name: name.map(|n| n.as_str().into()).into(),
        pattern_type: PatternType::from_code(pattern_type),
        principal: principal.map(|n| n.as_str().into()).into(),
        host: host.map(|n| n.as_str().into()).into(),
        operation: AclOperation::from_code(operation),
        permission: AclPermission::from_code(permission),
    }
}

/// Handles DescribeAcls v1–3.
pub async fn describe(authz: &Authz, checks: &RequestAuthz, request: DescribeAclsRequest) -> Reply {
    let mut response = DescribeAclsResponse::default();
    let fail = |mut response: DescribeAclsResponse, (error, message): (ResponseError, String)| {
        response.error_code = error.code();
        response.error_message = Some(text(&message));
        Reply::new(response, error.code())
    };
    if let Some(refused) = refusal(authz, checks, AclOperation::Describe) {
        return fail(response, refused);
    }
    let wanted = filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    );
    let bindings = match authz.acl_call(move |a| a.acls(&wanted)).await {
        Ok(bindings) => bindings,
        Err(e) => return fail(response, call_error(&e)),
    };
    // Kafka's `DescribeAclsResponse.aclsResources`: one resource per pattern.
    let mut resources: BTreeMap<ResourcePattern, Vec<AccessControlEntry>> = BTreeMap::new();
    for b in bindings {
        resources.entry(b.pattern).or_default().push(b.entry);
    }
    response.resources = resources
        .into_iter()
        .map(|(pattern, entries)| {
            let mut r = DescribeAclsResource::default();
            r.resource_type = pattern.resource_type.code();
            r.resource_name = text(&pattern.name);
            r.pattern_type = pattern.pattern_type.code();
            r.acls = entries
                .into_iter()
                .map(|e| {
                    let mut d = AclDescription::default();
                    d.principal = text(&e.principal);
                    d.host = text(&e.host);
                    d.operation = e.operation.code();
                    d.permission_type = e.permission.code();
                    d
                })
                .collect();
            r
        })
        .collect();
    Reply::new(response, 0)
}

/// Handles CreateAcls v1–3.
pub async fn create(authz: &Authz, checks: &RequestAuthz, request: CreateAclsRequest) -> Reply {
    let n = request.creations.len();
    let answer = |codes: Vec<(i16, Option<String>)>| {
        let mut response = CreateAclsResponse::default();
        response.results = codes
            .into_iter()
            .map(|(code, message)| {
                let mut r = AclCreationResult::default();
                r.error_code = code;
                r.error_message = message.as_deref().map(text);
                r
            })
            .collect();
        let error = super::errors::first_error(response.results.iter().map(|r| r.error_code));
        Reply::new(response, error)
    };
    if let Some((error, message)) = refusal(authz, checks, AclOperation::Alter) {
        return answer(vec![(error.code(), Some(message)); n]);
    }
    let mut results: Vec<Option<(i16, Option<String>)>> = vec![None; n];
    let mut valid = Vec::new();
    let mut valid_at = Vec::new();
    for (i, c) in request.creations.iter().enumerate() {
        let resource_type = ResourceType::from_code(c.resource_type);
        let invalid = if resource_type == ResourceType::Cluster
            && c.resource_name.as_str() != CLUSTER_RESOURCE_NAME
        {
            Some(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
            ))
        } else if c.resource_name.is_empty() {
            Some("Invalid empty resource name".to_owned())
        } else {
            None
        };
        if let Some(message) = invalid {
            results[i] = Some((ResponseError::InvalidRequest.code(), Some(message)));
            continue;
        }
        valid_at.push(i);
        valid.push(AclBinding {
            pattern: ResourcePattern {
                resource_type,
                name: c.resource_name.as_str().into(),
                pattern_type: PatternType::from_code(c.resource_pattern_type),
            },
            entry: AccessControlEntry {
                principal: c.principal.as_str().into(),
                host: c.host.as_str().into(),
                operation: AclOperation::from_code(c.operation),
                permission: AclPermission::from_code(c.permission_type),
            },
        });
    }
    if !valid.is_empty() {
        let count = valid.len();
        match authz.acl_call(move |a| a.create_acls(valid)).await {
            Ok(created) if created.len() == count => {
                for (i, result) in valid_at.into_iter().zip(created) {
                    results[i] = Some(match result.into_option() {
                        None => (0, None),
                        Some(e) => (
                            ResponseError::InvalidRequest.code(),
                            Some(e.message.to_string()),
                        ),
                    });
                }
            }
            Ok(_) => {
                for i in valid_at {
                    results[i] = Some((
                        ResponseError::UnknownServerError.code(),
                        Some("the authorizer answered the wrong number of results".into()),
                    ));
                }
            }
            Err(e) => {
                let (error, message) = call_error(&e);
                for i in valid_at {
                    results[i] = Some((error.code(), Some(message.clone())));
                }
            }
        }
    }
    answer(
        results
            .into_iter()
            .map(|r| r.unwrap_or((0, None)))
            .collect(),
    )
}

/// Handles DeleteAcls v1–3.
pub async fn delete(authz: &Authz, checks: &RequestAuthz, request: DeleteAclsRequest) -> Reply {
    let failed = |error: ResponseError, message: &str| {
        let mut r = DeleteAclsFilterResult::default();
        r.error_code = error.code();
        r.error_message = Some(text(message));
        r
    };
    let mut response = DeleteAclsResponse::default();
    if let Some((error, message)) = refusal(authz, checks, AclOperation::Alter) {
        response.filter_results = request
            .filters
            .iter()
            .map(|_| failed(error, &message))
            .collect();
        return Reply::new(response, error.code());
    }
    let filters: Vec<AclBindingFilter> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let count = filters.len();
    response.filter_results = match authz.acl_call(move |a| a.delete_acls(filters)).await {
        Ok(results) if results.len() == count => results
            .into_iter()
            .map(|result| match result.into_result() {
                Err(e) => failed(ResponseError::InvalidRequest, e.message.as_str()),
                Ok(deleted) => {
                    let mut r = DeleteAclsFilterResult::default();
                    r.matching_acls = deleted
                        .into_iter()
                        .map(|b| {
                            let mut m = DeleteAclsMatchingAcl::default();
                            m.resource_type = b.pattern.resource_type.code();
                            m.resource_name = text(&b.pattern.name);
                            m.pattern_type = b.pattern.pattern_type.code();
                            m.principal = text(&b.entry.principal);
                            m.host = text(&b.entry.host);
                            m.operation = b.entry.operation.code();
                            m.permission_type = b.entry.permission.code();
                            m
                        })
                        .collect();
                    r
                }
            })
            .collect(),
        Ok(_) => (0..count)
            .map(|_| {
                failed(
                    ResponseError::UnknownServerError,
                    "the authorizer answered the wrong number of results",
                )
            })
            .collect(),
        Err(e) => {
            let (error, message) = call_error(&e);
            (0..count).map(|_| failed(error, &message)).collect()
        }
    };
    let error = super::errors::first_error(response.filter_results.iter().map(|r| r.error_code));
    Reply::new(response, error)
}
