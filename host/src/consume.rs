//! `drover consume`: a console consumer of the native group protocol, on the
//! `drover-client` connector. It joins a group, prints every message it reads, one line
//! each, flushed at once (so what was printed survives a `kill -9`), prints membership
//! events to stderr, and on Ctrl-C or SIGTERM commits and leaves the group.

use std::{io::Write, time::Duration};

use drover_client::{
    ClientError, Consumer, ConsumerConfig, ConsumerEvent, Message, MessageStream, OffsetReset,
    TopicFilter,
};
use tokio::sync::mpsc;

/// What to subscribe to.
#[derive(Debug, Clone)]
pub enum Subscribe {
    /// Topics with a number of streams each.
    Topics(Vec<(String, usize)>),
    /// A whitelist or blacklist pattern read through `n` streams.
    Filter(TopicFilter, usize),
}

/// How each message is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// `topic partition offset`.
    Offsets,
    /// The value as text (lossy UTF-8).
    Values,
    /// `topic partition offset key value` (key `-` when null).
    Full,
}

/// A `drover consume` run.
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    /// Connector configuration.
    pub config: ConsumerConfig,
    /// Subscription.
    pub subscribe: Subscribe,
    /// Line format.
    pub output: Output,
    /// Stop (commit and leave) after this many messages.
    pub max_messages: Option<u64>,
    /// Stop after this long without a message, ms.
    pub idle_exit_ms: Option<u64>,
}

/// Parses `earliest`, `latest` or `none`.
pub fn parse_reset(text: &str) -> Result<OffsetReset, String> {
    match text {
        "earliest" => Ok(OffsetReset::Earliest),
        "latest" => Ok(OffsetReset::Latest),
        "none" => Ok(OffsetReset::None),
        other => Err(format!(
            "auto offset reset `{other}`: expected earliest, latest or none"
        )),
    }
}

/// Parses `TOPIC` or `TOPIC:STREAMS`.
pub fn parse_topic(text: &str) -> Result<(String, usize), String> {
    match text.rsplit_once(':') {
        Some((topic, n)) => n
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .map(|n| (topic.to_owned(), n))
            .ok_or_else(|| format!("`{text}`: expected TOPIC or TOPIC:STREAMS with STREAMS ≥ 1")),
        None => Ok((text.to_owned(), 1)),
    }
}

fn line(output: Output, m: &Message) -> String {
    let text = |b: &Option<bytes::Bytes>| {
        b.as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    match output {
        Output::Offsets => format!("{} {} {}", m.topic, m.partition, m.offset),
        Output::Values => text(&m.value).unwrap_or_default(),
        Output::Full => format!(
            "{} {} {} {} {}",
            m.topic,
            m.partition,
            m.offset,
            text(&m.key).unwrap_or_else(|| "-".into()),
            text(&m.value).unwrap_or_default()
        ),
    }
}

/// Runs until a signal, `max_messages` or `idle_exit_ms`; then commits and leaves.
pub async fn run(options: ConsumeOptions) -> Result<(), ClientError> {
    let (consumer, streams): (Consumer, Vec<MessageStream>) = match options.subscribe.clone() {
        Subscribe::Topics(topics) => {
            let (c, by_topic) =
                Consumer::create_message_streams(options.config.clone(), topics).await?;
            (c, by_topic.into_values().flatten().collect())
        }
        Subscribe::Filter(filter, n) => {
            Consumer::create_message_streams_by_filter(options.config.clone(), filter, n).await?
        }
    };
    let mut events = consumer.events();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            let text = match event {
                ConsumerEvent::Registered { generation } => {
                    format!("registered generation={generation}")
                }
                ConsumerEvent::Assigned {
                    generation,
                    partitions,
                } => format!(
                    "assigned generation={generation} partitions={}",
                    partitions
                        .iter()
                        .map(|(t, p)| format!("{t}-{p}"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                ConsumerEvent::Stopped { partitions } => format!(
                    "stopped partitions={}",
                    partitions
                        .iter()
                        .map(|(t, p)| format!("{t}-{p}"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                ConsumerEvent::Lost { reason } => format!("lost reason={reason}"),
                other => format!("{other:?}"),
            };
            eprintln!("event {text}");
        }
    });
    // Every stream feeds one printer, so lines never interleave.
    let (tx, mut rx) = mpsc::channel::<Result<Message, ClientError>>(1024);
    for mut stream in streams {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                if tx.send(item).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let idle = options.idle_exit_ms.map(Duration::from_millis);
    let mut count = 0u64;
    let stdout = std::io::stdout();
    loop {
        let next = async {
            match idle {
                Some(idle) => tokio::time::timeout(idle, rx.recv()).await.ok(),
                None => Some(rx.recv().await),
            }
        };
        let item = tokio::select! {
            item = next => item,
            _ = signal() => break,
        };
        match item {
            None | Some(None) => break,
            Some(Some(Ok(message))) => {
                let mut out = stdout.lock();
                let _ = writeln!(out, "{}", line(options.output, &message));
                let _ = out.flush();
                count += 1;
                if options.max_messages.is_some_and(|max| count >= max) {
                    break;
                }
            }
            Some(Some(Err(e))) => eprintln!("error {e}"),
        }
    }
    consumer.shutdown().await
}

async fn signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
