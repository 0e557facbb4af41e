//! The authorizer's [`RequestContext`] from what the server knows of a connection and
//! a request. Plain values in, so that this module needs nothing of the server's.

use std::net::IpAddr;

use super::RequestContext;

/// Who is connected, and how: what a connection adds to each request's context.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// `User:alice` as Kafka writes a principal.
    pub principal: &'a str,
    /// The listener's name.
    pub listener: &'a str,
    /// `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub security_protocol: &'a str,
    /// The SASL mechanism the connection authenticated with.
    pub sasl_mechanism: Option<&'a str>,
    /// The client's address.
    pub client_address: IpAddr,
}

/// The request itself: header fields.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The header's client id.
    pub client_id: Option<&'a str>,
    /// The API key (Kafka's, or a native key from 20000).
    pub api_key: i16,
    /// The API version.
    pub api_version: i16,
    /// The correlation id.
    pub correlation_id: i32,
}

/// The context the authorizer is handed for `request` from `caller`. An IPv4 address
/// mapped into IPv6 is given as IPv4, as a client sees it (and as ACL host filters
/// are written).
pub fn build(caller: &Caller<'_>, request: &RequestHead<'_>) -> RequestContext {
    let address = match caller.client_address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    RequestContext {
        principal: caller.principal.into(),
        listener: caller.listener.into(),
        security_protocol: caller.security_protocol.into(),
        sasl_mechanism: caller.sasl_mechanism.map(Into::into).into(),
        client_address: address.to_string().into(),
        client_id: request.client_id.unwrap_or_default().into(),
        api_key: request.api_key,
        api_version: request.api_version,
        correlation_id: request.correlation_id,
    }
}
