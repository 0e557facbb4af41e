//! The native messages, one module per API, and decoding by API key and version.
//!
//! Each message struct has `encode(&self, &mut BytesMut)` (appends its body) and
//! `decode(&mut Bytes)` (reads a body from the front, leaving what follows). Every
//! message is at v0 except RegisterConsumer, whose request has a v1
//! ([`RegisterConsumerRequest::version`] picks the lowest version that carries its
//! values; its decoder takes the version), and DescribeGroups, whose v1 and v2 answers
//! carry more (the request and response carry the version they are sent at). The functions here dispatch on the API key,
//! check the version and require the body to be consumed exactly.

use bytes::{Bytes, BytesMut};

use crate::api_key::ApiKey;
use crate::error::{DecodeError, EncodeError};

mod commit_offset;
mod common;
mod describe_groups;
mod describe_rebalances;
mod fetch_offsets;
mod heartbeat;
mod leave_group;
mod register_consumer;
mod start_fetcher;
mod stop_fetcher;

pub use commit_offset::{CommitOffsetRequest, CommitOffsetResponse, PartitionError, TopicErrors};
pub use common::{PartitionOffset, TopicOffsets, TopicPartitions};
pub use describe_groups::{
    DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup, DescribedMember, PartitionLoad,
    TopicLoads, DESCRIBE_GROUPS_MAX_VERSION,
};
pub use describe_rebalances::{
    DescribeRebalancesRequest, DescribeRebalancesResponse, GroupRebalances, RebalanceRecord,
    MAX_REBALANCES_PER_GROUP,
};
pub use fetch_offsets::{
    FetchOffsetsRequest, FetchOffsetsResponse, FetchedOffset, TopicFetchedOffsets,
};
pub use heartbeat::{HeartbeatRequest, HeartbeatResponse};
pub use leave_group::{LeaveGroupRequest, LeaveGroupResponse};
pub use register_consumer::{
    AutoOffsetReset, Label, MemberData, RegisterConsumerRequest, RegisterConsumerResponse,
    Subscription, SubscriptionKind, TopicStreams,
};
pub use start_fetcher::{
    PartitionStart, StartFetcherRequest, StartFetcherResponse, TopicAssignment,
};
pub use stop_fetcher::{StopFetcherRequest, StopFetcherResponse};

/// Any native request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NativeRequest {
    /// RegisterConsumer (20000).
    RegisterConsumer(RegisterConsumerRequest),
    /// Heartbeat (20001).
    Heartbeat(HeartbeatRequest),
    /// StopFetcher (20002).
    StopFetcher(StopFetcherRequest),
    /// StartFetcher (20003).
    StartFetcher(StartFetcherRequest),
    /// CommitOffset (20004).
    CommitOffset(CommitOffsetRequest),
    /// FetchOffsets (20005).
    FetchOffsets(FetchOffsetsRequest),
    /// LeaveGroup (20006).
    LeaveGroup(LeaveGroupRequest),
    /// DescribeGroups (20007).
    DescribeGroups(DescribeGroupsRequest),
    /// DescribeRebalances (20008).
    DescribeRebalances(DescribeRebalancesRequest),
}

/// Any native response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NativeResponse {
    /// RegisterConsumer (20000).
    RegisterConsumer(RegisterConsumerResponse),
    /// Heartbeat (20001).
    Heartbeat(HeartbeatResponse),
    /// StopFetcher (20002).
    StopFetcher(StopFetcherResponse),
    /// StartFetcher (20003).
    StartFetcher(StartFetcherResponse),
    /// CommitOffset (20004).
    CommitOffset(CommitOffsetResponse),
    /// FetchOffsets (20005).
    FetchOffsets(FetchOffsetsResponse),
    /// LeaveGroup (20006).
    LeaveGroup(LeaveGroupResponse),
    /// DescribeGroups (20007).
    DescribeGroups(DescribeGroupsResponse),
    /// DescribeRebalances (20008).
    DescribeRebalances(DescribeRebalancesResponse),
}

impl NativeRequest {
    /// The request's API.
    pub fn api_key(&self) -> ApiKey {
        match self {
            NativeRequest::RegisterConsumer(_) => ApiKey::RegisterConsumer,
            NativeRequest::Heartbeat(_) => ApiKey::Heartbeat,
            NativeRequest::StopFetcher(_) => ApiKey::StopFetcher,
            NativeRequest::StartFetcher(_) => ApiKey::StartFetcher,
            NativeRequest::CommitOffset(_) => ApiKey::CommitOffset,
            NativeRequest::FetchOffsets(_) => ApiKey::FetchOffsets,
            NativeRequest::LeaveGroup(_) => ApiKey::LeaveGroup,
            NativeRequest::DescribeGroups(_) => ApiKey::DescribeGroups,
            NativeRequest::DescribeRebalances(_) => ApiKey::DescribeRebalances,
        }
    }

    /// The version the request is encoded in: the lowest that carries its values (see
    /// [`RegisterConsumerRequest::version`]), the one a DescribeGroups request names
    /// ([`DescribeGroupsRequest::version`]); 0 for every other API.
    pub fn version(&self) -> i16 {
        match self {
            NativeRequest::RegisterConsumer(m) => m.version(),
            NativeRequest::DescribeGroups(m) => m.version,
            _ => 0,
        }
    }

    /// Appends the body at `version` (without header) to `buf`; on error `buf` is
    /// unchanged. Fails with [`EncodeError::UnsupportedVersion`] for a version of the
    /// API this codec does not implement, and [`EncodeError::VersionTooLow`] when the
    /// values need a later version than `version`.
    pub fn encode_version(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        match self {
            NativeRequest::RegisterConsumer(m) => m.encode_version(buf, version),
            _ if self.api_key().versions().contains(version) => self.encode(buf),
            _ => Err(EncodeError::UnsupportedVersion {
                api_key: self.api_key().code(),
                version,
            }),
        }
    }

    /// Appends the body at [`version`](Self::version) (without header) to `buf`; on
    /// error `buf` is unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            NativeRequest::RegisterConsumer(m) => m.encode(buf),
            NativeRequest::Heartbeat(m) => m.encode(buf),
            NativeRequest::StopFetcher(m) => m.encode(buf),
            NativeRequest::StartFetcher(m) => m.encode(buf),
            NativeRequest::CommitOffset(m) => m.encode(buf),
            NativeRequest::FetchOffsets(m) => m.encode(buf),
            NativeRequest::LeaveGroup(m) => m.encode(buf),
            NativeRequest::DescribeGroups(m) => m.encode(buf),
            NativeRequest::DescribeRebalances(m) => m.encode(buf),
        }
    }
}

impl NativeResponse {
    /// The API of the request this answers.
    pub fn api_key(&self) -> ApiKey {
        match self {
            NativeResponse::RegisterConsumer(_) => ApiKey::RegisterConsumer,
            NativeResponse::Heartbeat(_) => ApiKey::Heartbeat,
            NativeResponse::StopFetcher(_) => ApiKey::StopFetcher,
            NativeResponse::StartFetcher(_) => ApiKey::StartFetcher,
            NativeResponse::CommitOffset(_) => ApiKey::CommitOffset,
            NativeResponse::FetchOffsets(_) => ApiKey::FetchOffsets,
            NativeResponse::LeaveGroup(_) => ApiKey::LeaveGroup,
            NativeResponse::DescribeGroups(_) => ApiKey::DescribeGroups,
            NativeResponse::DescribeRebalances(_) => ApiKey::DescribeRebalances,
        }
    }

    /// Appends the body (without header) to `buf`; on error `buf` is unchanged. Every
    /// response but DescribeGroups has the same fields in all versions of its API
    /// (RegisterConsumer v1 answers as v0); a DescribeGroups answer is encoded at the
    /// version it carries ([`DescribeGroupsResponse::version`]).
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            NativeResponse::RegisterConsumer(m) => m.encode(buf),
            NativeResponse::Heartbeat(m) => m.encode(buf),
            NativeResponse::StopFetcher(m) => m.encode(buf),
            NativeResponse::StartFetcher(m) => m.encode(buf),
            NativeResponse::CommitOffset(m) => m.encode(buf),
            NativeResponse::FetchOffsets(m) => m.encode(buf),
            NativeResponse::LeaveGroup(m) => m.encode(buf),
            NativeResponse::DescribeGroups(m) => m.encode(buf),
            NativeResponse::DescribeRebalances(m) => m.encode(buf),
        }
    }
}

/// Checks that `api_key` is a native API and `version` one this codec implements.
pub fn check_version(api_key: i16, version: i16) -> Result<ApiKey, DecodeError> {
    let key = ApiKey::from_code(api_key).ok_or(DecodeError::UnknownApiKey(api_key))?;
    if !key.versions().contains(version) {
        return Err(DecodeError::UnsupportedVersion { api_key, version });
    }
    Ok(key)
}

fn finish<T>(body: &Bytes, value: T) -> Result<T, DecodeError> {
    if body.is_empty() {
        Ok(value)
    } else {
        Err(DecodeError::TrailingBytes(body.len()))
    }
}

/// Decodes a request body (the bytes after the request header) of API `api_key` at
/// `version`. The whole body must be one message.
pub fn decode_request(
    api_key: i16,
    version: i16,
    body: Bytes,
) -> Result<NativeRequest, DecodeError> {
    let key = check_version(api_key, version)?;
    let mut body = body;
    let buf = &mut body;
    let request = match key {
        ApiKey::RegisterConsumer => {
            NativeRequest::RegisterConsumer(RegisterConsumerRequest::decode(buf, version)?)
        }
        ApiKey::Heartbeat => NativeRequest::Heartbeat(HeartbeatRequest::decode(buf)?),
        ApiKey::StopFetcher => NativeRequest::StopFetcher(StopFetcherRequest::decode(buf)?),
        ApiKey::StartFetcher => NativeRequest::StartFetcher(StartFetcherRequest::decode(buf)?),
        ApiKey::CommitOffset => NativeRequest::CommitOffset(CommitOffsetRequest::decode(buf)?),
        ApiKey::FetchOffsets => NativeRequest::FetchOffsets(FetchOffsetsRequest::decode(buf)?),
        ApiKey::LeaveGroup => NativeRequest::LeaveGroup(LeaveGroupRequest::decode(buf)?),
        ApiKey::DescribeGroups => {
            NativeRequest::DescribeGroups(DescribeGroupsRequest::decode(buf, version)?)
        }
        ApiKey::DescribeRebalances => {
            NativeRequest::DescribeRebalances(DescribeRebalancesRequest::decode(buf)?)
        }
    };
    finish(&body, request)
}

/// Decodes a response body (the bytes after the response header) to a request of API
/// `api_key` sent at `version`. The whole body must be one message.
pub fn decode_response(
    api_key: ApiKey,
    version: i16,
    body: Bytes,
) -> Result<NativeResponse, DecodeError> {
    check_version(api_key.code(), version)?;
    let mut body = body;
    let buf = &mut body;
    let response = match api_key {
        ApiKey::RegisterConsumer => {
            NativeResponse::RegisterConsumer(RegisterConsumerResponse::decode(buf)?)
        }
        ApiKey::Heartbeat => NativeResponse::Heartbeat(HeartbeatResponse::decode(buf)?),
        ApiKey::StopFetcher => NativeResponse::StopFetcher(StopFetcherResponse::decode(buf)?),
        ApiKey::StartFetcher => NativeResponse::StartFetcher(StartFetcherResponse::decode(buf)?),
        ApiKey::CommitOffset => NativeResponse::CommitOffset(CommitOffsetResponse::decode(buf)?),
        ApiKey::FetchOffsets => NativeResponse::FetchOffsets(FetchOffsetsResponse::decode(buf)?),
        ApiKey::LeaveGroup => NativeResponse::LeaveGroup(LeaveGroupResponse::decode(buf)?),
        ApiKey::DescribeGroups => {
            NativeResponse::DescribeGroups(DescribeGroupsResponse::decode(buf, version)?)
        }
        ApiKey::DescribeRebalances => {
            NativeResponse::DescribeRebalances(DescribeRebalancesResponse::decode(buf)?)
        }
    };
    finish(&body, response)
}
