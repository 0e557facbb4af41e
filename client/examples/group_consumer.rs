//! A group consumer that prints what it reads.
//!
//! ```text
//! cargo run -p drover-client --example group_consumer -- BROKER GROUP TOPIC [STREAMS]
//! ```
//!
//! Start several with the same group: the coordinator spreads the topic's partitions
//! over them and moves them when one stops (Ctrl-C commits and leaves).

use drover_client::{Consumer, ConsumerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [broker, group, topic, rest @ ..] = args.as_slice() else {
        eprintln!("usage: group_consumer BROKER GROUP TOPIC [STREAMS]");
        std::process::exit(2);
    };
    let streams: usize = rest.first().map_or(Ok(1), |s| s.parse())?;
    let config = ConsumerConfig::new([broker.as_str()], group);
    let (consumer, mut by_topic) =
        Consumer::create_message_streams(config, [(topic.as_str(), streams)]).await?;
    let mut readers = Vec::new();
    for mut stream in by_topic.remove(topic.as_str()).unwrap_or_default() {
        readers.push(tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                match message {
                    Ok(m) => println!(
                        "stream {} {}-{}@{} key={:?} value={}",
                        stream.index,
                        m.topic,
                        m.partition,
                        m.offset,
                        m.key.as_deref().map(String::from_utf8_lossy),
                        m.value
                            .as_deref()
                            .map(String::from_utf8_lossy)
                            .unwrap_or_default()
                    ),
                    Err(e) => eprintln!("stream {}: {e}", stream.index),
                }
            }
        }));
    }
    tokio::signal::ctrl_c().await?;
    consumer.shutdown().await?;
    for r in readers {
        let _ = r.await;
    }
    Ok(())
}
