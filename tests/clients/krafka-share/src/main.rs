//! A krafka share consumer for Drover's integration tests: joins share group GROUP on
//! TOPIC, prints one line per record delivered, `OFFSET DELIVERY_COUNT VALUE`, and
//! exits after MAX records or IDLE_MS without a record (after the first), closing the
//! consumer so its acknowledgements are sent.
//!
//! Usage: `krafka-share BOOTSTRAP GROUP TOPIC MAX IDLE_MS MODE`, where MODE is
//! `implicit` (every record accepted by the next poll) or `release-once` (explicit:
//! a record's first delivery is released, its second accepted).

use std::time::{Duration, Instant};

use krafka::Kafka;
use krafka::share_consumer::AcknowledgementMode;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, group, topic, max, idle_ms, mode] = args.as_slice() else {
        return Err("usage: krafka-share BOOTSTRAP GROUP TOPIC MAX IDLE_MS MODE".into());
    };
    let max: usize = max.parse()?;
    let idle = Duration::from_millis(idle_ms.parse()?);
    let release_once = match mode.as_str() {
        "implicit" => false,
        "release-once" => true,
        other => return Err(format!("unknown mode {other}").into()),
    };
    let kafka = Kafka::builder(bootstrap.clone()).connect().await?;
    let mut builder = kafka.share_consumer(group.clone());
    if release_once {
        builder = builder.acknowledgement_mode(AcknowledgementMode::Explicit);
    }
    let consumer = builder.build().await?;
    consumer.subscribe([topic.as_str()]).await?;
    let mut seen = 0usize;
    let mut last = Instant::now();
    let started = Instant::now();
    while seen < max {
        let records = consumer.poll(Duration::from_millis(500)).await?;
        if records.is_empty() {
            // Idle after the first record, or for 60 s before any.
            let (waited, limit) = if seen == 0 {
                (started.elapsed(), Duration::from_secs(60))
            } else {
                (last.elapsed(), idle)
            };
            if waited >= limit {
                break;
            }
            continue;
        }
        last = Instant::now();
        for r in &records {
            let count = r.delivery_count.unwrap_or(-1);
            let value = r.value.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            println!("{} {} {}", r.offset, count, value);
            if release_once {
                if count <= 1 {
                    consumer.release(r)?;
                } else {
                    consumer.ack(r)?;
                }
            }
            seen += 1;
        }
        if release_once {
            consumer.commit().await?;
        }
    }
    consumer.close().await?;
    println!("done {seen}");
    Ok(())
}
