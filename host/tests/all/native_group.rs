//! The coordinator plugin inside the real broker: `drover serve` with the coordinator,
//! assignor and offset-store `.so` files in its plugin directory, and light consumers
//! speaking the native protocol over loopback TCP. A group of 3 forms; heartbeat
//! offsets are committed; one consumer's connection drops and the other two take over
//! its partitions from the committed offsets; the admin API describes the group.

use std::{
    net::SocketAddr,
    path::Path,
    time::{Duration, Instant},
};

use bytes::{Bytes, BytesMut};
use drover_protocol::{
    decode_response_frame, encode_request_frame, ApiKey, FetchOffsetsRequest, NativeRequest,
    NativeResponse,
};
use drover_tests::{
    native::{ChannelEvent, ConsumerSpec, LightConsumer},
    served::{self, Served},
    PluginDir,
};
use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic, ApiKey as KafkaKey, CreateTopicsRequest,
        RequestHeader, TopicName,
    },
    protocol::{Encodable, StrBytes},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

fn serve(dir: &PluginDir, plugin_config: &str) -> Served {
    served::serve(
        Path::new(env!("CARGO_BIN_EXE_drover")),
        dir,
        &dir.scratch("data"),
        &format!("[coordinator]\ndefault_assignor = \"sticky\"\n{plugin_config}"),
    )
}

async fn roundtrip(addr: SocketAddr, frame: BytesMut) -> Bytes {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&frame).await.unwrap();
    let size = stream.read_i32().await.unwrap();
    let mut buf = vec![0; size as usize];
    stream.read_exact(&mut buf).await.unwrap();
    Bytes::from(buf)
}

async fn create_topic(addr: SocketAddr, name: &str, partitions: i32) {
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.to_owned()));
    topic.num_partitions = partitions;
    topic.replication_factor = 1;
    let mut request = CreateTopicsRequest::default();
    request.topics.push(topic);
    request.timeout_ms = 10_000;
    let version = 5;
    let mut header = RequestHeader::default();
    header.request_api_key = KafkaKey::CreateTopics as i16;
    header.request_api_version = version;
    header.correlation_id = 1;
    let mut body = BytesMut::new();
    header
        .encode(
            &mut body,
            KafkaKey::CreateTopics.request_header_version(version),
        )
        .unwrap();
    request.encode(&mut body, version).unwrap();
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(&body);
    roundtrip(addr, frame).await;
}

async fn committed(addr: SocketAddr, group: &str) -> Vec<(String, i32, i64)> {
    let request = NativeRequest::FetchOffsets(FetchOffsetsRequest {
        group_id: group.into(),
        topics: None,
    });
    let mut frame = BytesMut::new();
    encode_request_frame(&mut frame, 9, Some("test"), &request).unwrap();
    let answer = roundtrip(addr, frame).await;
    let (_, response) = decode_response_frame(answer, ApiKey::FetchOffsets, 0).unwrap();
    let NativeResponse::FetchOffsets(response) = response else {
        panic!("{response:?}")
    };
    assert!(response.error_code.is_none(), "{response:?}");
    let mut out = Vec::new();
    for topic in response.topics {
        for p in topic.partitions {
            out.push((topic.topic.clone(), p.partition, p.offset));
        }
    }
    out.sort();
    out
}

/// Waits until `consumer` reports a StartFetcher satisfying `done`; returns it.
async fn wait_started(
    consumer: &mut LightConsumer,
    within: Duration,
    done: impl Fn(&[(String, i32, i64)]) -> bool,
) -> Vec<(String, i32, i64)> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, consumer.events.recv()).await {
            Ok(Some(ChannelEvent::Started { assignment, .. })) if done(&assignment) => {
                return assignment
            }
            Ok(Some(ChannelEvent::Closed { reason }))
            | Ok(Some(ChannelEvent::Refused {
                message: Some(reason),
                ..
            })) => {
                panic!("{}: {reason}", consumer.spec.consumer_id)
            }
            Ok(Some(_)) => {}
            Ok(None) => panic!("{}: events ended", consumer.spec.consumer_id),
            Err(_) => panic!(
                "{}: no matching StartFetcher within {within:?}",
                consumer.spec.consumer_id
            ),
        }
    }
}

fn plugin_dir() -> PluginDir {
    let dir = PluginDir::new();
    for lib in [
        "drover_coordinator",
        "drover_assignor_range",
        "drover_assignor_sticky",
        "drover_offsets_embedded",
    ] {
        dir.add_built(lib);
    }
    dir
}

const COORDINATOR_CONFIG: &str = "[plugins.config.drover-coordinator]\n\
    min_session_timeout_ms = 1000\nrebalance_delay_ms = 100\ncommit_interval_ms = 200\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_three_forms_and_survivors_take_over_from_committed_offsets() {
    let dir = plugin_dir();
    let broker = serve(&dir, COORDINATOR_CONFIG);
    create_topic(broker.kafka, "orders", 6).await;

    let spec = |id: &str| ConsumerSpec {
        group: "billing".into(),
        consumer_id: id.into(),
        topics: vec![("orders".into(), 1)],
        session_timeout_ms: 1_500,
        assignor: None,
    };
    let mut consumers = Vec::new();
    for id in ["c1", "c2", "c3"] {
        consumers.push(LightConsumer::start(broker.kafka, spec(id)).await.unwrap());
    }
    // Each ends up with 2 of the 6 partitions (sticky, balanced).
    for c in &mut consumers {
        wait_started(c, Duration::from_secs(20), |a| a.len() == 2).await;
    }
    let mut all: Vec<_> = consumers.iter().flat_map(|c| c.owned()).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6, "every partition owned exactly once: {all:?}");

    // Consumption moves the positions; heartbeats carry them to the offset store.
    for (i, c) in consumers.iter().enumerate() {
        c.advance(10 * (i as i64 + 1));
    }
    let expected: Vec<(String, i32, i64)> = {
        let mut v: Vec<_> = consumers
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                c.owned()
                    .into_iter()
                    .map(move |(t, p)| (t, p, 10 * (i as i64 + 1)))
            })
            .collect();
        v.sort();
        v
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = committed(broker.kafka, "billing").await;
        if got == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "heartbeat offsets not committed: {got:?} != {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // c3's connection drops; c1 and c2 take over its partitions at its committed
    // offset (30), after its session timeout has surely passed.
    let victim = consumers.pop().unwrap();
    let orphaned = victim.owned();
    victim.kill();
    let mut taken = Vec::new();
    for c in &mut consumers {
        let assignment = wait_started(c, Duration::from_secs(20), |a| a.len() == 3).await;
        for (topic, partition, start) in assignment {
            if orphaned.contains(&(topic.clone(), partition)) {
                assert_eq!(
                    start, 30,
                    "{topic}-{partition} must resume at c3's committed offset"
                );
                taken.push((topic, partition));
            }
        }
    }
    taken.sort();
    assert_eq!(
        taken, orphaned,
        "the survivors took over exactly c3's partitions"
    );

    // The admin API shows the group.
    let groups = http_get(broker.admin, "/v1/groups/billing").await;
    assert!(
        groups.contains("\"c1\"") && groups.contains("\"c2\""),
        "{groups}"
    );
    assert!(!groups.contains("\"c3\""), "{groups}");
}

/// A minimal HTTP/1.1 GET (the admin API is plain HTTP on loopback).
async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}
