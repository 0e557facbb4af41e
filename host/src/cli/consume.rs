//! `drover consume`: a console consumer of the native group protocol, on the
//! `drover-client` connector. It joins a group, prints every message it reads, one line
//! each, flushed at once (so what was printed survives a `kill -9`), prints membership
//! events to stderr, and on Ctrl-C or SIGTERM commits and leaves the group.

use std::{
    io::Write,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use drover_client::{
    ClientError, Consumer, ConsumerConfig, ConsumerEvent, Message, MessageStream, OffsetReset,
    SaslCredentials, SaslMechanism, Security, TlsSettings, TopicFilter,
};

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

/// Parses a `--label` as `KEY=VALUE` (split at the first `=`; the value may be empty,
/// the key not).
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!(
            "--label `{text}`: expected KEY=VALUE with a non-empty KEY"
        )),
    }
}

/// The security flags of `drover consume` (Kafka's `security.protocol`,
/// `ssl.ca.location`, `sasl.mechanism`, `sasl.username`, and the password from a file).
#[derive(Debug, Clone, Copy)]
pub struct SecurityArgs<'a> {
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    pub protocol: &'a str,
    /// The CA file (SSL, SASL_SSL).
    pub ca: Option<&'a std::path::Path>,
    /// The client's certificate chain and key files (mTLS listeners).
    pub client_cert: Option<(&'a std::path::Path, &'a std::path::Path)>,
    /// The SASL mechanism's name.
    pub mechanism: &'a str,
    /// The SASL user.
    pub username: Option<&'a str>,
    /// The file whose first line is the SASL password.
    pub password_file: Option<&'a std::path::Path>,
}

/// The connector's security settings from the flags; the password is read from its
/// file (its first line). Errors name flags and files, never the password.
pub fn parse_security(args: SecurityArgs<'_>) -> Result<Security, String> {
    let (tls, sasl) = match args.protocol.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(format!(
                "--security-protocol {other}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            ))
        }
    };
    let tls = match (tls, args.ca) {
        (true, Some(ca)) => Some(TlsSettings {
            ca_file: ca.to_path_buf(),
            client_cert: args
                .client_cert
                .map(|(chain, key)| (chain.to_path_buf(), key.to_path_buf())),
        }),
        (true, None) => return Err("--ssl-ca-location is needed with TLS".into()),
        (false, Some(_)) => {
            return Err("--ssl-ca-location needs --security-protocol SSL or SASL_SSL".into())
        }
        (false, None) if args.client_cert.is_some() => {
            return Err(
                "--ssl-certificate-location needs --security-protocol SSL or SASL_SSL".into(),
            )
        }
        (false, None) => None,
    };
    let sasl = match (sasl, args.username, args.password_file) {
        (true, Some(username), Some(file)) => {
            let mechanism = SaslMechanism::from_name(args.mechanism).ok_or_else(|| {
                format!(
                    "--sasl-mechanism {}: expected SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN",
                    args.mechanism
                )
            })?;
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("--sasl-password-file {}: {}", file.display(), e.kind()))?;
            let password = text.lines().next().unwrap_or_default().to_owned();
            if password.is_empty() {
                return Err(format!(
                    "--sasl-password-file {}: the first line is empty",
                    file.display()
                ));
            }
            Some(SaslCredentials {
                mechanism,
                username: username.to_owned(),
                password,
            })
        }
        (true, _, _) => return Err("SASL needs --sasl-username and --sasl-password-file".into()),
        (false, None, None) => None,
        (false, _, _) => {
            return Err(
                "--sasl-username and --sasl-password-file need --security-protocol \
                 SASL_PLAINTEXT or SASL_SSL"
                    .into(),
            )
        }
    };
    Ok(Security { tls, sasl })
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
    // Each stream prints what it takes at once (taking a message is what marks it
    // consumed, and consumed offsets are what gets committed): nothing is taken that
    // is not printed. Lines are written whole under the stdout lock.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let printed = Arc::new(AtomicU64::new(0));
    let last_print = Arc::new(Mutex::new(Instant::now()));
    let enough = Arc::new(tokio::sync::Notify::new());
    let unreadable = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for mut stream in streams {
        let mut stopped = stopped.clone();
        let (printed, last_print, enough, unreadable) = (
            Arc::clone(&printed),
            Arc::clone(&last_print),
            Arc::clone(&enough),
            Arc::clone(&unreadable),
        );
        let output = options.output;
        let max = options.max_messages;
        readers.push(tokio::spawn(async move {
            loop {
                // Cancelling `next` while it waits takes nothing.
                let item = tokio::select! {
                    item = stream.next() => item,
                    _ = stopped.wait_for(|s| *s) => return,
                };
                match item {
                    None => return,
                    Some(Ok(message)) => {
                        if !stream.is_current() {
                            // Stopped, moved, or the lease ran out while we held it:
                            // the next owner delivers it.
                            continue;
                        }
                        {
                            let mut out = std::io::stdout().lock();
                            let _ = writeln!(out, "{}", line(output, &message));
                            let _ = out.flush();
                        }
                        stream.done();
                        *last_print.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
                        let n = printed.fetch_add(1, Ordering::Relaxed) + 1;
                        if max.is_some_and(|max| n >= max) {
                            enough.notify_one();
                            return;
                        }
                    }
                    Some(Err(e)) => {
                        eprintln!("error {e}");
                        unreadable.store(true, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let idle = options.idle_exit_ms.map(Duration::from_millis);
    // Installed once: a signal that arrives at any moment stops the consumer.
    let signal = signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            _ = &mut signal => break,
            _ = enough.notified() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if readers.iter().all(|r| r.is_finished()) {
                    break;
                }
                if let Some(idle) = idle {
                    let last = *last_print.lock().unwrap_or_else(|e| e.into_inner());
                    if last.elapsed() >= idle {
                        break;
                    }
                }
            }
        }
    }
    stop.send_replace(true);
    for reader in readers {
        let _ = reader.await;
    }
    consumer.shutdown().await?;
    if unreadable.load(Ordering::Relaxed) {
        // Kafka fails the same way (NoOffsetForPartition): the exit status says so.
        return Err(ClientError::Config(
            "some partitions could not be read (see the `error` lines above)".into(),
        ));
    }
    Ok(())
}

/// Completes at Ctrl-C or SIGTERM. The SIGTERM listener is registered when this is
/// first polled, so create the future once and keep polling the same one.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_key_equals_value() {
        assert_eq!(parse_label("disk=ssd"), Ok(("disk".into(), "ssd".into())));
        assert_eq!(parse_label("k=a=b"), Ok(("k".into(), "a=b".into())));
        assert_eq!(parse_label("k="), Ok(("k".into(), String::new())));
        assert!(parse_label("=v").is_err());
        assert!(parse_label("novalue").is_err());
    }

    #[test]
    fn security_flags_make_the_connector_settings_and_never_show_the_password() {
        let dir = std::env::temp_dir().join(format!("drover-consume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pw = dir.join("pw");
        std::fs::write(&pw, "s3cret\nignored\n").unwrap();
        let ca = dir.join("ca.pem");
        let args = SecurityArgs {
            protocol: "sasl_ssl",
            ca: Some(&ca),
            client_cert: None,
            mechanism: "scram-sha-256",
            username: Some("app"),
            password_file: Some(&pw),
        };
        let security = parse_security(args).unwrap();
        assert_eq!(security.tls.unwrap().ca_file, ca);
        let sasl = security.sasl.unwrap();
        assert_eq!(sasl.mechanism, SaslMechanism::ScramSha256);
        assert_eq!(
            (sasl.username.as_str(), sasl.password.as_str()),
            ("app", "s3cret")
        );
        assert!(!format!("{sasl:?}").contains("s3cret"));
        let plain = SecurityArgs {
            protocol: "PLAINTEXT",
            ca: None,
            username: None,
            password_file: None,
            ..args
        };
        assert_eq!(parse_security(plain).unwrap(), Security::default());
        for bad in [
            SecurityArgs {
                protocol: "TLS",
                ..args
            },
            SecurityArgs { ca: None, ..args },
            SecurityArgs {
                username: None,
                ..args
            },
            SecurityArgs {
                mechanism: "GSSAPI",
                ..args
            },
            SecurityArgs {
                protocol: "SSL",
                ..args
            },
            SecurityArgs {
                protocol: "PLAINTEXT",
                username: None,
                password_file: None,
                ..args
            },
        ] {
            let e = parse_security(bad).unwrap_err();
            assert!(!e.contains("s3cret"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
