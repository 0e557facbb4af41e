//! The host as a Kafka client of its own coordinator: the ApiVersions probe that tells
//! which Kafka group APIs the coordinator serves, and the ListGroups / DescribeGroups
//! calls the admin API uses for classic groups, ConsumerGroupDescribe for KIP-848
//! groups.
//!
//! Each call is one request on a connection of its own
//! ([`CoordinatorClient::call`]), encoded and decoded with `kafka-protocol`.

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, DescribeGroupsRequest, ListGroupsRequest, RequestHeader,
    RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::driver::{CoordinatorClient, DriverError};

/// A group as Kafka's ListGroups (v5) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub group: String,
    /// `classic`, `consumer` (KIP-848) or `native`.
    pub group_type: String,
    /// Kafka's state name (`Stable`, `Empty`, ...).
    pub state: String,
    /// The protocol type (`consumer` for Kafka consumers).
    pub protocol_type: String,
}

/// A classic group's member, from DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// The client's id.
    pub client_id: String,
    /// The client's host, as the coordinator saw it (may be empty).
    pub client_host: String,
    /// Subscribed topics, from `consumer` protocol metadata (empty if it does not
    /// parse).
    pub topics: Vec<String>,
    /// Assigned partitions (topic, partition), from the `consumer` protocol assignment.
    pub partitions: Vec<(String, i32)>,
}

/// A classic group, from DescribeGroups (v5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicGroup {
    /// Kafka's state name.
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// The selected protocol: the client-side assignor's name.
    pub protocol: String,
    /// Members.
    pub members: Vec<ClassicMember>,
}

impl CoordinatorClient {
    /// One Kafka request to the coordinator at `version`; the decoded response.
    pub async fn kafka_call(
        &self,
        key: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, DriverError> {
        let refused = |e: String| DriverError::Refused(format!("{key:?} v{version}: {e}"));
        let mut frame = BytesMut::new();
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = 1;
        header.client_id = Some(StrBytes::from_static_str("drover-host"));
        header
            .encode(&mut frame, key.request_header_version(version))
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| refused(e.to_string()))?;
        let mut answer = self.call(key as i16, frame.freeze()).await?;
        ResponseHeader::decode(&mut answer, key.response_header_version(version))
            .and_then(|_| ResponseKind::decode(key, &mut answer, version))
            .map_err(|e| refused(e.to_string()))
    }

    /// Asks the coordinator which Kafka APIs it serves (ApiVersions v3) and returns
    /// this client knowing the answer, for routing and the broker's own ApiVersions
    /// (called once at startup, before the client is handed out). A coordinator that
    /// closes the connection or answers with an error serves none.
    pub async fn probe_kafka_apis(self) -> Self {
        let answer = self
            .kafka_call(
                ApiKey::ApiVersions,
                3,
                RequestKind::ApiVersions(ApiVersionsRequest::default()),
            )
            .await;
        let apis = match answer {
            Ok(ResponseKind::ApiVersions(r)) if r.error_code == 0 => r
                .api_keys
                .iter()
                .filter(|a| !drover_protocol::ApiKey::is_native_code(a.api_key))
                .map(|a| (a.api_key, a.min_version, a.max_version))
                .collect(),
            Ok(_) => Vec::new(),
            Err(e) => {
                tracing::info!(plugin = %self.plugin(), "the coordinator serves no Kafka group API ({e})");
                Vec::new()
            }
        };
        if !apis.is_empty() {
            tracing::info!(plugin = %self.plugin(), apis = apis.len(), "the coordinator serves Kafka's group APIs");
        }
        self.with_kafka_apis(apis)
    }

    /// Every group the coordinator serves, of every protocol (ListGroups v5).
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, DriverError> {
        let answer = self
            .kafka_call(
                ApiKey::ListGroups,
                5,
                RequestKind::ListGroups(ListGroupsRequest::default()),
            )
            .await?;
        let ResponseKind::ListGroups(r) = answer else {
            return Err(DriverError::Refused("ListGroups: another answer".into()));
        };
        Ok(r.groups
            .into_iter()
            .map(|g| ListedGroup {
                group: g.group_id.to_string(),
                group_type: g.group_type.to_string(),
                state: g.group_state.to_string(),
                protocol_type: g.protocol_type.to_string(),
            })
            .collect())
    }

    /// A classic group (DescribeGroups v5), or `None` if the coordinator does not know
    /// it as a classic group.
    pub async fn describe_classic(&self, group: &str) -> Result<Option<ClassicGroup>, DriverError> {
        let mut request = DescribeGroupsRequest::default();
        request.groups = vec![StrBytes::from_string(group.to_owned()).into()];
        let answer = self
            .kafka_call(
                ApiKey::DescribeGroups,
                5,
                RequestKind::DescribeGroups(request),
            )
            .await?;
        let ResponseKind::DescribeGroups(r) = answer else {
            return Err(DriverError::Refused(
                "DescribeGroups: another answer".into(),
            ));
        };
        let Some(g) = r.groups.into_iter().next() else {
            return Ok(None);
        };
        if g.error_code != 0 || g.group_state.as_str() == "Dead" {
            return Ok(None);
        }
        let consumer = g.protocol_type.as_str() == "consumer";
        Ok(Some(ClassicGroup {
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| ClassicMember {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    topics: if consumer {
                        subscription_topics(m.member_metadata)
                    } else {
                        Vec::new()
                    },
                    partitions: if consumer {
                        assigned_partitions(m.member_assignment)
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }))
    }
}

/// A KIP-848 group's member, from ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    /// Member id.
    pub member_id: String,
    /// The member's epoch.
    pub member_epoch: i32,
    /// The client's host.
    pub client_host: String,
    /// The client's id (`client.id`).
    pub client_id: String,
    /// Subscribed topic names.
    pub topics: Vec<String>,
    /// Subscribed regular expression, if any.
    pub regex: Option<String>,
    /// Current assignment (topic, partition).
    pub partitions: Vec<(String, i32)>,
    /// The rack the client declared (`client.rack`, KIP-848 `rack_id`), if any.
    pub rack: Option<String>,
}

/// A KIP-848 group, from ConsumerGroupDescribe (v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// State (`Empty`, `Assigning`, `Reconciling`, `Stable`).
    pub state: String,
    /// Group epoch.
    pub group_epoch: i32,
    /// The server-side assignor.
    pub assignor: String,
    /// Members.
    pub members: Vec<ConsumerMember>,
}

impl CoordinatorClient {
    /// A KIP-848 group (ConsumerGroupDescribe v1), or `None` if the coordinator does
    /// not know it as one.
    pub async fn describe_consumer_group(
        &self,
        group: &str,
    ) -> Result<Option<ConsumerGroup>, DriverError> {
        let mut request = ConsumerGroupDescribeRequest::default();
        request.group_ids = vec![StrBytes::from_string(group.to_owned()).into()];
        let answer = self
            .kafka_call(
                ApiKey::ConsumerGroupDescribe,
                1,
                RequestKind::ConsumerGroupDescribe(request),
            )
            .await?;
        let ResponseKind::ConsumerGroupDescribe(r) = answer else {
            return Err(DriverError::Refused(
                "ConsumerGroupDescribe: another answer".into(),
            ));
        };
        let Some(g) = r.groups.into_iter().next().filter(|g| g.error_code == 0) else {
            return Ok(None);
        };
        Ok(Some(ConsumerGroup {
            state: g.group_state.to_string(),
            group_epoch: g.group_epoch,
            assignor: g.assignor_name.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| ConsumerMember {
                    member_id: m.member_id.to_string(),
                    member_epoch: m.member_epoch,
                    client_host: m.client_host.to_string(),
                    client_id: m.client_id.to_string(),
                    topics: m
                        .subscribed_topic_names
                        .iter()
                        .map(|t| t.to_string())
                        .collect(),
                    regex: m.subscribed_topic_regex.map(|r| r.to_string()),
                    rack: m.rack_id.map(|r| r.to_string()),
                    partitions: m
                        .assignment
                        .topic_partitions
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.to_string(), *p)))
                        .collect(),
                })
                .collect(),
        }))
    }
}

/// The topics of a `consumer` protocol subscription (a version, then Kafka's
/// ConsumerProtocolSubscription); empty when it does not parse.
fn subscription_topics(mut metadata: bytes::Bytes) -> Vec<String> {
    if metadata.len() < 2 {
        return Vec::new();
    }
    let version = metadata.get_i16().clamp(0, 3);
    ConsumerProtocolSubscription::decode(&mut metadata, version)
        .map(|s| s.topics.iter().map(|t| t.to_string()).collect())
        .unwrap_or_default()
}

/// The partitions of a `consumer` protocol assignment; empty when it does not parse.
fn assigned_partitions(mut assignment: bytes::Bytes) -> Vec<(String, i32)> {
    if assignment.len() < 2 {
        return Vec::new();
    }
    let version = assignment.get_i16().clamp(0, 3);
    ConsumerProtocolAssignment::decode(&mut assignment, version)
        .map(|a| {
            a.assigned_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p)))
                .collect()
        })
        .unwrap_or_default()
}
