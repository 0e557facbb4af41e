//! The demo's consumers: `drover consume` child processes (the `drover-client`
//! connector), so that one can be killed for real with SIGKILL. Their stdout (one line
//! per message: `topic partition offset key value`) and their membership events on
//! stderr become [`Seen`] values on one channel.

use std::{process::Stdio, time::Instant};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::mpsc,
};

/// What the demo learns from a consumer.
#[derive(Debug, Clone)]
pub enum Seen {
    /// A message was delivered to the application.
    Record {
        /// Which consumer.
        consumer: usize,
        /// Partition.
        partition: i32,
        /// Offset.
        offset: i64,
        /// The value.
        value: String,
    },
    /// A StartFetcher was applied: the consumer owns `partitions` in `generation`.
    Assigned {
        /// Which consumer.
        consumer: usize,
        /// Generation.
        generation: i32,
        /// Partition numbers.
        partitions: Vec<i32>,
        /// When the demo read the line.
        at: Instant,
    },
    /// The process exited.
    Exited {
        /// Which consumer.
        consumer: usize,
    },
}

/// A running consumer process.
pub struct ConsumerProcess {
    /// Its consumer id.
    pub id: String,
    child: Child,
}

/// What a consumer process is started with.
pub struct ConsumerSpawn<'a> {
    /// The `drover` binary.
    pub exe: &'a std::path::Path,
    /// Bootstrap broker.
    pub broker: &'a str,
    /// Group.
    pub group: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Session timeout, ms.
    pub session_timeout_ms: u64,
}

impl ConsumerProcess {
    /// Starts consumer number `index`; its output goes to `seen`.
    pub fn spawn(
        spec: &ConsumerSpawn<'_>,
        index: usize,
        seen: mpsc::UnboundedSender<Seen>,
    ) -> std::io::Result<ConsumerProcess> {
        let id = format!("{}-consumer-{}", spec.group, index + 1);
        let mut child = Command::new(spec.exe)
            .args(["consume", "--brokers", spec.broker, "--group", spec.group])
            .args([
                "--topic",
                spec.topic,
                "--format",
                "full",
                "--consumer-id",
                &id,
            ])
            .args(["--session-timeout-ms", &spec.session_timeout_ms.to_string()])
            .args(["--auto-commit-interval-ms", "500"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        if let Some(stdout) = stdout {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(record) = parse_record(index, &line) {
                        let _ = seen.send(record);
                    }
                }
                let _ = seen.send(Seen::Exited { consumer: index });
            });
        }
        if let Some(stderr) = stderr {
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    match parse_assigned(index, &line) {
                        Some(event) => {
                            let _ = seen.send(event);
                        }
                        None if line.starts_with("event ") => {}
                        None => tracing::warn!(consumer = index + 1, "{line}"),
                    }
                }
            });
        }
        Ok(ConsumerProcess { id, child })
    }

    /// SIGKILL: no commit, no LeaveGroup — a crash.
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// SIGTERM: the consumer commits, leaves and exits; waits for it.
    pub async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) with a pid of our own child and SIGTERM has no memory
            // effects.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        let _ = self.child.wait().await;
    }
}

/// `topic partition offset key value` → a record.
fn parse_record(consumer: usize, line: &str) -> Option<Seen> {
    let mut parts = line.splitn(5, ' ');
    let _topic = parts.next()?;
    let partition = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let _key = parts.next()?;
    let value = parts.next().unwrap_or("").to_owned();
    Some(Seen::Record {
        consumer,
        partition,
        offset,
        value,
    })
}

/// `event assigned generation=G partitions=t-0,t-3` → an assignment.
fn parse_assigned(consumer: usize, line: &str) -> Option<Seen> {
    let rest = line.strip_prefix("event assigned generation=")?;
    let (generation, partitions) = rest.split_once(" partitions=")?;
    let partitions = partitions
        .split(',')
        .filter(|p| !p.is_empty())
        .filter_map(|tp| tp.rsplit_once('-')?.1.parse().ok())
        .collect();
    Some(Seen::Assigned {
        consumer,
        generation: generation.parse().ok()?,
        partitions,
        at: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records_and_assignments() {
        let Some(Seen::Record {
            partition,
            offset,
            value,
            ..
        }) = parse_record(0, "lines 3 17 42 GNU GENERAL PUBLIC LICENSE")
        else {
            panic!()
        };
        assert_eq!(
            (partition, offset, value.as_str()),
            (3, 17, "GNU GENERAL PUBLIC LICENSE")
        );
        let Some(Seen::Assigned {
            generation,
            partitions,
            ..
        }) = parse_assigned(
            1,
            "event assigned generation=4 partitions=my-topic-0,my-topic-5",
        )
        else {
            panic!()
        };
        assert_eq!((generation, partitions), (4, vec![0, 5]));
        assert!(parse_assigned(1, "event assigned generation=4 partitions=").is_some());
        assert!(parse_record(0, "garbage").is_none());
    }
}
