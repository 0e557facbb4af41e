//! A consumer subscribed with a whitelist pattern: it reads every topic whose name
//! matches, including topics created after it started.
//!
//! ```text
//! cargo run -p drover-client --example wildcard_consumer -- BROKER GROUP 'orders-.*' [STREAMS]
//! ```

use drover_client::{Consumer, ConsumerConfig, TopicFilter};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [broker, group, pattern, rest @ ..] = args.as_slice() else {
        eprintln!("usage: wildcard_consumer BROKER GROUP PATTERN [STREAMS]");
        std::process::exit(2);
    };
    let streams: usize = rest.first().map_or(Ok(1), |s| s.parse())?;
    let config = ConsumerConfig::new([broker.as_str()], group);
    let (consumer, streams) = Consumer::create_message_streams_by_filter(
        config,
        TopicFilter::Whitelist(pattern.clone()),
        streams,
    )
    .await?;
    let mut events = consumer.events();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            eprintln!("membership: {event:?}");
        }
    });
    for mut stream in streams {
        tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                match message {
                    Ok(m) => println!("{}-{}@{}", m.topic, m.partition, m.offset),
                    Err(e) => eprintln!("stream {}: {e}", stream.index),
                }
            }
        });
    }
    tokio::signal::ctrl_c().await?;
    consumer.shutdown().await?;
    Ok(())
}
