//! Share groups' delivery (KIP-932, issue 31 items 3 and 4) inside the real broker, with
//! raw frames from the `kafka-protocol` crate: `drover serve` with the embedded offset
//! store, ShareFetch v1 and ShareAcknowledge v1 from made-up member ids (membership is
//! the coordinator's half; delivery needs only a member id).
//!
//! - two members get different records; Release makes them available again with
//!   delivery count 2; Reject and Accept are final; five deliveries archive a record;
//! - acknowledgements of records another member holds (INVALID_RECORD_STATE), ranges
//!   past the end offset (INVALID_REQUEST), wrong session epochs, unknown sessions;
//! - an abandoned member's records come back after the lock duration (15 s);
//! - after `kill -9` and a restart, accepted records are never delivered again and
//!   acquired ones come back with their delivery count kept;
//! - an offset-store swap carries share state: after it (and a `kill -9`), what was
//!   acknowledged before and after the swap stays acknowledged;
//! - sessions from one client stay within the per-client bound: past it they are
//!   refused (SHARE_SESSION_LIMIT_REACHED, after a throttle time) and the first session
//!   is kept;
//! - ApiVersions lists ShareFetch and ShareAcknowledge.

use std::{net::SocketAddr, path::Path, time::Duration};

use bytes::{Bytes, BytesMut};
use drover_tests::{
    served::{self, Served},
    PluginDir,
};
use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic,
        metadata_request::MetadataRequestTopic,
        produce_request::{PartitionProduceData, TopicProduceData},
        share_acknowledge_request::{
            AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatchA,
        },
        share_fetch_request::{AcknowledgementBatch, FetchPartition, FetchTopic},
        ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, GroupId,
        MetadataRequest, MetadataResponse, ProduceRequest, RequestHeader, ShareAcknowledgeRequest,
        ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse, TopicName,
    },
    protocol::{Decodable, Encodable, StrBytes},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use uuid::Uuid;

const NONE: i16 = 0;
const INVALID_REQUEST: i16 = 42;
const INVALID_RECORD_STATE: i16 = 121;
const SHARE_SESSION_NOT_FOUND: i16 = 122;
const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
const SHARE_SESSION_LIMIT_REACHED: i16 = 133;
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;

fn plugin_dir() -> PluginDir {
    let dir = PluginDir::new();
    for lib in [
        "drover_coordinator",
        "drover_assignor_range",
        "drover_offsets_embedded",
    ] {
        dir.add_built(lib);
    }
    dir
}

/// Starts the broker on `data` (kept across restarts) with `[share]` settings `share`.
fn serve(dir: &PluginDir, data: &Path, share: &str) -> Served {
    served::serve(
        Path::new(env!("CARGO_BIN_EXE_drover")),
        dir,
        data,
        &format!("[coordinator]\ndefault_assignor = \"range\"\n[share]\n{share}\n"),
    )
}

/// One connection speaking Kafka requests.
struct Conn {
    stream: TcpStream,
    correlation: i32,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        Conn {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation: 0,
        }
    }

    async fn call<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> R {
        self.correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation;
        header.client_id = Some(StrBytes::from_static_str("share-test"));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .unwrap();
        request.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await.unwrap();
        let size = self.stream.read_i32().await.unwrap();
        let mut buf = vec![0; size as usize];
        self.stream.read_exact(&mut buf).await.unwrap();
        let mut buf = Bytes::from(buf);
        let header_version = key.response_header_version(version);
        kafka_protocol::messages::ResponseHeader::decode(&mut buf, header_version).unwrap();
        R::decode(&mut buf, version).unwrap()
    }
}

/// Creates `name` with one partition and produces `count` records to it; returns its id.
async fn topic_with_records(conn: &mut Conn, name: &str, count: usize) -> Uuid {
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.to_owned()));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    let mut create = CreateTopicsRequest::default();
    create.topics.push(topic);
    create.timeout_ms = 10_000;
    let _: kafka_protocol::messages::CreateTopicsResponse =
        conn.call(ApiKey::CreateTopics, 5, &create).await;
    if count > 0 {
        produce(conn, name, count).await;
    }
    let mut metadata = MetadataRequest::default();
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    metadata.topics = Some(vec![wanted]);
    let response: MetadataResponse = conn.call(ApiKey::Metadata, 12, &metadata).await;
    response.topics[0].topic_id
}

async fn produce(conn: &mut Conn, name: &str, count: usize) {
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(Bytes::from(drover_log::test_util::batch(count, 10, 1_000)));
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_string(name.to_owned()));
    data.partition_data.push(partition);
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data.push(data);
    let response: kafka_protocol::messages::ProduceResponse =
        conn.call(ApiKey::Produce, 9, &request).await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        NONE
    );
}

/// A ShareFetch of partition 0 of `topic` for `member` at `epoch`, acknowledging
/// `acks` (first, last, type), acquiring at most `max_records`.
async fn share_fetch(
    conn: &mut Conn,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
    max_records: i32,
) -> ShareFetchResponse {
    let request = fetch_request(member, epoch, topic, acks, max_records);
    conn.call(ApiKey::ShareFetch, 1, &request).await
}

/// The ShareFetch [`share_fetch`] sends (`max_wait_ms` 200).
fn fetch_request(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
    max_records: i32,
) -> ShareFetchRequest {
    let mut partition = FetchPartition::default();
    partition.partition_index = 0;
    partition.acknowledgement_batches = acks
        .iter()
        .map(|&(first, last, t)| {
            AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    let mut request = ShareFetchRequest::default();
    request.group_id = Some(GroupId(StrBytes::from_static_str("queue")));
    request.member_id = Some(StrBytes::from_string(member.to_owned()));
    request.share_session_epoch = epoch;
    request.max_wait_ms = 200;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.max_records = max_records;
    request.batch_size = max_records;
    request.topics = vec![FetchTopic::default()
        .with_topic_id(topic)
        .with_partitions(vec![partition])];
    request
}

async fn share_ack(
    conn: &mut Conn,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeResponse {
    let partition = AcknowledgePartition::default()
        .with_partition_index(0)
        .with_acknowledgement_batches(
            acks.iter()
                .map(|&(first, last, t)| {
                    AckBatchA::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_acknowledge_types(vec![t])
                })
                .collect(),
        );
    let mut request = ShareAcknowledgeRequest::default();
    request.group_id = Some(GroupId(StrBytes::from_static_str("queue")));
    request.member_id = Some(StrBytes::from_string(member.to_owned()));
    request.share_session_epoch = epoch;
    request.topics = vec![AcknowledgeTopic::default()
        .with_topic_id(topic)
        .with_partitions(vec![partition])];
    conn.call(ApiKey::ShareAcknowledge, 1, &request).await
}

/// (first, last, delivery count) of every acquired range in a response.
fn acquired(response: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(response.error_code, NONE, "{response:?}");
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| {
            assert_eq!(p.error_code, NONE, "{p:?}");
            p.acquired_records
                .iter()
                .map(|r| (r.first_offset, r.last_offset, r.delivery_count))
        })
        .collect()
}

fn ack_code(response: &ShareFetchResponse) -> i16 {
    response.responses[0].partitions[0].acknowledge_error_code
}

fn ack_response_code(response: &ShareAcknowledgeResponse) -> i16 {
    assert_eq!(response.error_code, NONE, "{response:?}");
    response.responses[0].partitions[0].error_code
}

const SHARE: &str = "auto_offset_reset = \"earliest\"\nrecord_lock_duration_ms = 15000\nmax_sessions_per_client = 100";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_records_and_acknowledgements_follow_kip_932() {
    let dir = plugin_dir();
    let broker = serve(&dir, &dir.scratch("data"), SHARE);
    let mut conn = Conn::open(broker.kafka).await;

    let versions: ApiVersionsResponse = conn
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    for key in [ApiKey::ShareFetch, ApiKey::ShareAcknowledge] {
        let v = versions.api_keys.iter().find(|v| v.api_key == key as i16);
        assert_eq!(
            v.map(|v| (v.min_version, v.max_version)),
            Some((1, 1)),
            "{key:?}"
        );
    }

    let topic = topic_with_records(&mut conn, "orders", 10).await;
    // Two members get different records.
    let a = share_fetch(&mut conn, "member-a", 0, topic, &[], 4).await;
    assert_eq!(acquired(&a), [(0, 3, 1)]);
    assert_eq!(a.acquisition_lock_timeout_ms, 15_000);
    let records = a.responses[0].partitions[0].records.clone().unwrap();
    assert!(
        !records.is_empty(),
        "the batch holding the records is returned"
    );
    let b = share_fetch(&mut conn, "member-b", 0, topic, &[], 100).await;
    assert_eq!(acquired(&b), [(4, 9, 1)]);

    // a releases 0–1, accepts 2, rejects 3 (ShareAcknowledge, epoch 1).
    let ack = share_ack(
        &mut conn,
        "member-a",
        1,
        topic,
        &[(0, 1, RELEASE), (2, 2, ACCEPT), (3, 3, REJECT)],
    )
    .await;
    assert_eq!(ack_response_code(&ack), NONE);
    // b accepts its records piggy-backed on its next fetch, and gets 0–1 again, counted
    // twice; 2 and 3 never come back.
    let b2 = share_fetch(&mut conn, "member-b", 1, topic, &[(4, 9, ACCEPT)], 100).await;
    assert_eq!(ack_code(&b2), NONE);
    assert_eq!(acquired(&b2), [(0, 1, 2)]);

    // a acknowledging b's records: INVALID_RECORD_STATE; a range past the end:
    // INVALID_REQUEST; neither changes anything.
    let ack = share_ack(&mut conn, "member-a", 2, topic, &[(0, 1, ACCEPT)]).await;
    assert_eq!(ack_response_code(&ack), INVALID_RECORD_STATE);
    let ack = share_ack(&mut conn, "member-b", 2, topic, &[(0, 100, ACCEPT)]).await;
    assert_eq!(ack_response_code(&ack), INVALID_REQUEST);

    // Session epochs: a stale one, an unknown session, epoch 0 for an acknowledgement,
    // acknowledgements with a new session.
    let stale = share_fetch(&mut conn, "member-b", 1, topic, &[], 10).await;
    assert_eq!(stale.error_code, INVALID_SHARE_SESSION_EPOCH);
    let unknown = share_fetch(&mut conn, "member-z", 1, topic, &[], 10).await;
    assert_eq!(unknown.error_code, SHARE_SESSION_NOT_FOUND);
    let zero = share_ack(&mut conn, "member-b", 0, topic, &[(0, 1, ACCEPT)]).await;
    assert_eq!(zero.error_code, INVALID_SHARE_SESSION_EPOCH);
    let opening = share_fetch(&mut conn, "member-c", 0, topic, &[(0, 0, ACCEPT)], 10).await;
    assert_eq!(opening.error_code, INVALID_REQUEST);

    // b rejects 0–1 (the session moved on to 3 with the acknowledgements above).
    let ack = share_ack(&mut conn, "member-b", 3, topic, &[(0, 1, REJECT)]).await;
    assert_eq!(ack_response_code(&ack), NONE);
    // Nothing is left for anyone.
    let c = share_fetch(&mut conn, "member-c", 0, topic, &[], 100).await;
    assert_eq!(acquired(&c), []);

    // Five deliveries without an accept: archived.
    let once = topic_with_records(&mut conn, "poison", 1).await;
    let mut epoch = 0;
    for delivery in 1..=5i16 {
        let got = share_fetch(&mut conn, "member-p", epoch, once, &[], 10).await;
        assert_eq!(acquired(&got), [(0, 0, delivery)]);
        epoch += 1;
        let ack = share_ack(&mut conn, "member-p", epoch, once, &[(0, 0, RELEASE)]).await;
        assert_eq!(ack_response_code(&ack), NONE);
        epoch += 1;
    }
    let after = share_fetch(&mut conn, "member-p", epoch, once, &[], 10).await;
    assert_eq!(acquired(&after), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_members_records_come_back_after_the_lock_duration() {
    let dir = plugin_dir();
    let broker = serve(&dir, &dir.scratch("data"), SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    let topic = topic_with_records(&mut conn, "jobs", 3).await;
    let gone = share_fetch(&mut conn, "vanished", 0, topic, &[], 100).await;
    assert_eq!(acquired(&gone), [(0, 2, 1)]);
    let early = share_fetch(&mut conn, "survivor", 0, topic, &[], 100).await;
    assert_eq!(acquired(&early), []);
    // The lock is 15 s (its minimum); poll until the timer has given them back.
    let mut epoch = 1;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = share_fetch(&mut conn, "survivor", epoch, topic, &[], 100).await;
        epoch += 1;
        let ranges = acquired(&got);
        if !ranges.is_empty() {
            assert_eq!(ranges, [(0, 2, 2)]);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "records never came back"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_state_survives_kill_9() {
    let dir = plugin_dir();
    let data = dir.scratch("data");
    let topic;
    {
        let broker = serve(&dir, &data, SHARE);
        let mut conn = Conn::open(broker.kafka).await;
        topic = topic_with_records(&mut conn, "ledger", 6).await;
        let got = share_fetch(&mut conn, "before", 0, topic, &[], 100).await;
        assert_eq!(acquired(&got), [(0, 5, 1)]);
        let ack = share_ack(
            &mut conn,
            "before",
            1,
            topic,
            &[(0, 2, ACCEPT), (4, 4, REJECT)],
        )
        .await;
        assert_eq!(ack_response_code(&ack), NONE);
        // Dropping the child kills it with SIGKILL.
    }
    let broker = serve(&dir, &data, SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    let got = share_fetch(&mut conn, "after", 0, topic, &[], 100).await;
    // 3 and 5 were acquired when the broker died: delivered again, counted twice.
    assert_eq!(acquired(&got), [(3, 3, 2), (5, 5, 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_per_client_bound_are_refused_and_the_first_kept() {
    let dir = plugin_dir();
    let broker = serve(&dir, &dir.scratch("data"), SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    let topic = topic_with_records(&mut conn, "flood", 1).await;
    let first = share_fetch(&mut conn, "flood-0", 0, topic, &[], 1).await;
    assert_eq!(acquired(&first), [(0, 0, 1)]);
    // Each refusal is answered after its throttle time (1 s): a few are enough.
    for i in 1..103 {
        let mut request = ShareFetchRequest::default();
        request.group_id = Some(GroupId(StrBytes::from_static_str("queue")));
        request.member_id = Some(StrBytes::from_string(format!("flood-{i}")));
        request.max_wait_ms = 0;
        let response: ShareFetchResponse = conn.call(ApiKey::ShareFetch, 1, &request).await;
        // max_sessions_per_client = 100, and none is idle for session_idle_ms: the
        // address's 100 sessions stay, every further one is refused.
        let want = if i < 100 {
            NONE
        } else {
            SHARE_SESSION_LIMIT_REACHED
        };
        assert_eq!(response.error_code, want, "session {i}");
        if want == SHARE_SESSION_LIMIT_REACHED {
            assert_eq!(response.throttle_time_ms, 1_000, "session {i}");
        }
    }
    // The first session was not pushed out: its member still holds its record (nothing
    // to acquire, nothing released), and a refused member has no session.
    let kept = share_fetch(&mut conn, "flood-0", 1, topic, &[], 1).await;
    assert_eq!(kept.error_code, NONE);
    assert_eq!(acquired(&kept), []);
    let refused = share_fetch(&mut conn, "flood-102", 1, topic, &[], 1).await;
    assert_eq!(refused.error_code, SHARE_SESSION_NOT_FOUND);
}

/// One HTTP/1.1 exchange with the admin API: the response's body.
async fn admin(addr: SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_store_swap_carries_share_state() {
    let dir = plugin_dir();
    let data = dir.scratch("data");
    let (before, after);
    {
        let broker = serve(&dir, &data, SHARE);
        let mut conn = Conn::open(broker.kafka).await;
        before = topic_with_records(&mut conn, "acked-before", 6).await;
        after = topic_with_records(&mut conn, "acked-after", 2).await;
        let got = share_fetch(&mut conn, "m", 0, before, &[], 100).await;
        assert_eq!(acquired(&got), [(0, 5, 1)]);
        let ack = share_ack(&mut conn, "m", 1, before, &[(0, 1, ACCEPT), (2, 2, REJECT)]).await;
        assert_eq!(ack_response_code(&ack), NONE);
        let target = dir.scratch("swapped-to.redb");
        let started = admin(
            broker.admin,
            "POST",
            "/v1/offset-store",
            &format!(r#"{{"plugin":"embedded","config":{{"path":{target:?}}}}}"#),
        )
        .await;
        assert!(started.starts_with("HTTP/1.1 2"), "{started}");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let status = admin(broker.admin, "GET", "/v1/offset-store", "").await;
            if status.contains(r#""state":"completed""#) {
                break;
            }
            assert!(!status.contains(r#""state":"failed""#), "{status}");
            assert!(std::time::Instant::now() < deadline, "{status}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // After the swap: written to the new store only.
        let got = share_fetch(&mut conn, "n", 0, after, &[], 100).await;
        assert_eq!(acquired(&got), [(0, 1, 1)]);
        let ack = share_ack(&mut conn, "n", 1, after, &[(0, 0, ACCEPT)]).await;
        assert_eq!(ack_response_code(&ack), NONE);
        // SIGKILL on drop; the restart reopens the store the swap made active.
    }
    let broker = serve(&dir, &data, SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    // What was acknowledged before the swap was copied; what was acquired counts.
    let got = share_fetch(&mut conn, "later", 0, before, &[], 100).await;
    assert_eq!(acquired(&got), [(3, 5, 2)]);
    let got = share_fetch(&mut conn, "later-2", 0, after, &[], 100).await;
    assert_eq!(acquired(&got), [(1, 1, 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_applies_its_acknowledgements_and_releases_the_rest() {
    let dir = plugin_dir();
    let broker = serve(&dir, &dir.scratch("data"), SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    let topic = topic_with_records(&mut conn, "closing", 3).await;
    let got = share_fetch(&mut conn, "leaving", 0, topic, &[], 100).await;
    assert_eq!(acquired(&got), [(0, 2, 1)]);
    // Epoch −1: accept 0, fetch nothing, close; 1 and 2 go back at once.
    let close = share_fetch(&mut conn, "leaving", -1, topic, &[(0, 0, ACCEPT)], 100).await;
    assert_eq!(close.error_code, NONE, "{close:?}");
    assert_eq!(ack_code(&close), NONE);
    assert!(close.responses[0].partitions[0].acquired_records.is_empty());
    let gone = share_fetch(&mut conn, "leaving", 1, topic, &[], 100).await;
    assert_eq!(gone.error_code, SHARE_SESSION_NOT_FOUND);
    let next = share_fetch(&mut conn, "staying", 0, topic, &[], 100).await;
    assert_eq!(acquired(&next), [(1, 2, 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_fetch_gets_records_released_meanwhile() {
    let dir = plugin_dir();
    let broker = serve(&dir, &dir.scratch("data"), SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    let topic = topic_with_records(&mut conn, "handover", 1).await;
    let got = share_fetch(&mut conn, "holder", 0, topic, &[], 100).await;
    assert_eq!(acquired(&got), [(0, 0, 1)]);
    let opened = share_fetch(&mut conn, "waiter", 0, topic, &[], 100).await;
    assert_eq!(acquired(&opened), []);
    // The waiter long-polls (up to the broker's cap) on its own connection while the
    // holder releases the record: no append happens, the release wakes it.
    let mut waiting = Conn::open(broker.kafka).await;
    let mut request = fetch_request("waiter", 1, topic, &[], 100);
    request.max_wait_ms = 30_000;
    let wait = tokio::spawn(async move {
        let response: ShareFetchResponse = waiting.call(ApiKey::ShareFetch, 1, &request).await;
        response
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ack = share_ack(&mut conn, "holder", 1, topic, &[(0, 0, RELEASE)]).await;
    assert_eq!(ack_response_code(&ack), NONE);
    let got = wait.await.unwrap();
    assert_eq!(acquired(&got), [(0, 0, 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_recreated_under_its_name_starts_its_share_partitions_afresh() {
    let dir = plugin_dir();
    let broker = serve(&dir, &dir.scratch("data"), SHARE);
    let mut conn = Conn::open(broker.kafka).await;
    let old = topic_with_records(&mut conn, "reborn", 5).await;
    let got = share_fetch(&mut conn, "m", 0, old, &[], 100).await;
    assert_eq!(acquired(&got), [(0, 4, 1)]);
    let ack = share_ack(&mut conn, "m", 1, old, &[(0, 4, ACCEPT)]).await;
    assert_eq!(ack_response_code(&ack), NONE);
    // Delete it (v5 names topics) and create it again with 3 records.
    let mut delete = kafka_protocol::messages::DeleteTopicsRequest::default();
    delete.topic_names = vec![TopicName(StrBytes::from_static_str("reborn"))];
    delete.timeout_ms = 10_000;
    let deleted: kafka_protocol::messages::DeleteTopicsResponse =
        conn.call(ApiKey::DeleteTopics, 5, &delete).await;
    assert_eq!(deleted.responses[0].error_code, NONE, "{deleted:?}");
    let new = topic_with_records(&mut conn, "reborn", 3).await;
    assert_ne!(new, old);
    // The group's state of the old topic (start offset 5) is not the new topic's.
    let got = share_fetch(&mut conn, "m2", 0, new, &[], 100).await;
    assert_eq!(acquired(&got), [(0, 2, 1)]);
}
