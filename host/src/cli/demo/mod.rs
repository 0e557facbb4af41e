//! `drover demo`: the whole system on real input, from one command.
//!
//! 1. Starts a standalone broker in this process with the coordinator, the sticky
//!    assignor and the embedded offset store loaded from the plugin directory.
//! 2. Starts three `drover consume` processes (the `drover-client` connector) in one
//!    group on a six-partition topic.
//! 3. Produces the lines of real text files ([`input`]) with a real Kafka client
//!    library (rskafka), paced so the run can be watched.
//! 4. Kills one consumer with SIGKILL midway; the others take its partitions over from
//!    the committed offsets once its lease has run out.
//! 5. Stops the survivors (they commit and leave) and prints a summary: produced,
//!    consumed, duplicates (allowed only on the killed consumer's partitions:
//!    at-least-once), missing (must be 0), every rebalance with its duration, and the
//!    final committed offsets against the log end offsets. The result is an error if
//!    anything is missing or wrong.

pub mod consumers;
pub mod input;
mod report;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::{IsTerminal, Write},
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use rskafka::{
    client::{
        partition::{Compression, UnknownTopicHandling},
        ClientBuilder,
    },
    record::Record,
};
use tokio::sync::mpsc;

use self::{
    consumers::{ConsumerProcess, ConsumerSpawn, Seen},
    input::Line,
    report::{Rebalance, Report},
};
use drover_host::config::Config;

/// The demo's topic and group.
const TOPIC: &str = "demo-lines";
const GROUP: &str = "demo-group";
const PARTITIONS: i32 = 6;
const CONSUMERS: usize = 3;
/// Session timeout of the demo's consumers, ms (the coordinator's minimum is lowered
/// to it), so the takeover after the kill is quick to watch.
const SESSION_TIMEOUT_MS: u64 = 3_000;
/// Longest the whole demo may take.
const DEADLINE: Duration = Duration::from_secs(180);

/// What `drover demo` runs with.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The `drover` binary (consumers are `drover consume` child processes).
    pub exe: PathBuf,
    /// The plugin directory (coordinator, sticky, embedded).
    pub plugin_dir: PathBuf,
    /// Broker state; a fresh temporary directory when `None`.
    pub data_dir: Option<PathBuf>,
    /// Input files; the default input when empty.
    pub inputs: Vec<PathBuf>,
    /// Lines produced per second.
    pub rate: u32,
}

/// The broker config of the demo.
fn demo_config(options: &DemoOptions, data_dir: PathBuf) -> Result<Config, String> {
    let text = format!(
        "data_dir = {data:?}\n\
         [server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n\
         [plugins]\ndir = {plugins:?}\nrequired = [\"drover-coordinator\", \"sticky\", \"embedded\"]\n\
         [coordinator]\ndefault_assignor = \"sticky\"\noffset_store = \"embedded\"\n\
         [plugins.config.drover-coordinator]\nmin_session_timeout_ms = {SESSION_TIMEOUT_MS}\n\
         rebalance_delay_ms = 300\ncommit_interval_ms = 500\n",
        data = data_dir.display().to_string(),
        plugins = options.plugin_dir.display().to_string(),
    );
    Config::parse(std::path::Path::new("<demo>"), &text).map_err(|e| e.to_string())
}

/// Runs the demo; `Ok` carries the printed summary's verdict.
pub async fn run(options: DemoOptions) -> Result<(), String> {
    let lines = {
        let files = if options.inputs.is_empty() {
            let repo = options
                .exe
                .ancestors()
                .nth(3)
                .map(PathBuf::from)
                .unwrap_or_default();
            input::default_files(&repo)
        } else {
            options.inputs.clone()
        };
        if files.is_empty() {
            return Err(format!(
                "no input: {} is missing; name files with --input",
                input::DEFAULT_INPUT_DIR
            ));
        }
        println!(
            "input: {} file(s): {}",
            files.len(),
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        input::read_lines(&files)?
    };
    let temp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let data_dir = options
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.path().join("data"));
    let config = demo_config(&options, data_dir)?;
    let running = drover_host::serve::start(config)
        .await
        .map_err(|e| format!("the broker did not start: {e}"))?;
    println!(
        "broker: Kafka on {}, admin API on http://{}/v1/groups/{GROUP}",
        running.listen, running.admin
    );
    let outcome = tokio::time::timeout(DEADLINE, drive(&options, &running, lines)).await;
    let broker = Arc::clone(&running.broker);
    let outcome = match outcome {
        Ok(result) => result,
        Err(_) => Err(format!("the demo did not finish within {DEADLINE:?}")),
    };
    running.stop().await;
    drop(broker);
    outcome
}

/// Everything between broker start and stop.
async fn drive(
    options: &DemoOptions,
    running: &drover_host::serve::Running,
    lines: Vec<Line>,
) -> Result<(), String> {
    let bootstrap = running.listen.to_string();
    let client = ClientBuilder::new(vec![bootstrap.clone()])
        .build()
        .await
        .map_err(|e| format!("Kafka client: {e}"))?;
    client
        .controller_client()
        .map_err(|e| format!("Kafka client: {e}"))?
        .create_topic(TOPIC, PARTITIONS, 1, 10_000)
        .await
        .map_err(|e| format!("create topic {TOPIC}: {e}"))?;
    println!("topic {TOPIC}: {PARTITIONS} partitions; group {GROUP}: {CONSUMERS} consumers");

    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let spawn = ConsumerSpawn {
        exe: &options.exe,
        broker: &bootstrap,
        group: GROUP,
        topic: TOPIC,
        session_timeout_ms: SESSION_TIMEOUT_MS,
    };
    let mut procs = Vec::new();
    for i in 0..CONSUMERS {
        procs.push(
            ConsumerProcess::spawn(&spawn, i, seen_tx.clone())
                .map_err(|e| format!("cannot start consumer {}: {e}", i + 1))?,
        );
    }
    let mut watch = Watch::new(lines.len());
    watch.rebalances.push(Rebalance::new("3 consumers join"));

    // The producer runs beside the event loop.
    let (produced_tx, mut produced_rx) = mpsc::unbounded_channel();
    let rate = options.rate.max(1);
    let producer = {
        let lines = lines.clone();
        let partitions = {
            let mut v = Vec::new();
            for p in 0..PARTITIONS {
                v.push(
                    client
                        .partition_client(TOPIC, p, UnknownTopicHandling::Retry)
                        .await
                        .map_err(|e| format!("partition client: {e}"))?,
                );
            }
            v
        };
        tokio::spawn(async move { produce(lines, partitions, rate, produced_tx).await })
    };

    let tty = std::io::stdout().is_terminal();
    let mut tick = tokio::time::interval(Duration::from_millis(if tty { 200 } else { 1000 }));
    let mut victim: Option<usize> = None;
    loop {
        tokio::select! {
            Some(event) = seen.recv() => watch.on_seen(event),
            Some(batch) = produced_rx.recv() => {
                match batch {
                    Ok(batch) => watch.on_produced(batch),
                    Err(e) => return Err(e),
                }
            }
            _ = tick.tick() => watch.display(tty, victim),
        }
        // Kill one consumer midway, once the group is stable and has delivered half.
        if victim.is_none()
            && watch.stable_generation().is_some()
            && watch.consumed_unique() * 2 >= lines.len()
        {
            let v = CONSUMERS - 1;
            procs[v].kill();
            watch.kill(v);
            victim = Some(v);
            watch
                .rebalances
                .push(Rebalance::new("consumer 3 killed (SIGKILL)"));
            if tty {
                println!();
            }
            println!(
                "killed {} with SIGKILL after {} of {} lines were consumed; its partitions \
                 move once its {SESSION_TIMEOUT_MS} ms lease runs out",
                procs[v].id,
                watch.consumed_unique(),
                lines.len()
            );
        }
        if victim.is_some()
            && watch.produced.len() == lines.len()
            && watch.consumed_unique() == lines.len()
            && watch.stable_generation().is_some()
        {
            break;
        }
    }
    let _ = producer.await;
    watch.display(tty, victim);
    if tty {
        println!();
    }
    // The survivors commit and leave.
    for (i, p) in procs.iter_mut().enumerate() {
        if Some(i) != victim {
            p.stop().await;
        }
    }
    while let Ok(event) = seen.try_recv() {
        watch.on_seen(event);
    }
    let committed = final_offsets(running).await?;
    let report = Report::build(&watch, &lines, committed, victim);
    report.print();
    if report.ok() {
        Ok(())
    } else {
        Err("the demo found missing or wrong data (see the summary above)".into())
    }
}

/// Committed offset and log end offset of every partition of the demo topic.
async fn final_offsets(
    running: &drover_host::serve::Running,
) -> Result<BTreeMap<i32, (Option<i64>, i64)>, String> {
    let broker = Arc::clone(&running.broker);
    tokio::task::spawn_blocking(move || {
        let store = broker.offsets().ok_or("the offset store is not open")?;
        let committed: BTreeMap<i32, i64> = store
            .fetch_group(GROUP)
            .map_err(|e| format!("offset store: {e}"))?
            .into_iter()
            .filter(|r| r.topic.as_str() == TOPIC)
            .map(|r| (r.partition, r.offset))
            .collect();
        let topic = broker.topics.get(TOPIC).ok_or("the demo topic is gone")?;
        Ok(topic
            .partitions
            .iter()
            .map(|p| {
                let end = p
                    .log
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .log_end_offset();
                (p.index, (committed.get(&p.index).copied(), end))
            })
            .collect())
    })
    .await
    .map_err(|e| format!("final offsets: {e}"))?
}

/// A produced batch: (line index, partition, offset) of each record.
type Produced = Vec<(usize, i32, i64)>;

/// Produces every line, keyed by `file:line`, round-robin over the partitions in
/// batches, at about `rate` lines per second.
async fn produce(
    lines: Vec<Line>,
    partitions: Vec<rskafka::client::partition::PartitionClient>,
    rate: u32,
    out: mpsc::UnboundedSender<Result<Produced, String>>,
) {
    const BATCH: usize = 20;
    let pause = Duration::from_secs_f64(BATCH as f64 / f64::from(rate));
    let started = Instant::now();
    for (b, chunk) in lines.chunks(BATCH).enumerate() {
        let partition = b % partitions.len();
        let first = b * BATCH;
        let records = chunk
            .iter()
            .map(|line| Record {
                key: Some(format!("{}:{}", line.file, line.number).into_bytes()),
                value: Some(line.text.clone().into_bytes()),
                headers: BTreeMap::new(),
                timestamp: chrono::Utc::now(),
            })
            .collect();
        match partitions[partition]
            .produce(records, Compression::NoCompression)
            .await
        {
            Ok(offsets) => {
                let batch = offsets
                    .into_iter()
                    .enumerate()
                    .map(|(i, offset)| (first + i, partition as i32, offset))
                    .collect();
                let _ = out.send(Ok(batch));
            }
            Err(e) => {
                let _ = out.send(Err(format!("produce to {TOPIC}-{partition}: {e}")));
                return;
            }
        }
        let due = started + pause * (b as u32 + 1);
        tokio::time::sleep_until(due.into()).await;
    }
}

/// What the demo has seen so far.
pub(crate) struct Watch {
    total: usize,
    /// (partition, offset) → line index.
    pub produced: HashMap<(i32, i64), usize>,
    /// (partition, offset) → deliveries, with the delivered text.
    pub consumed: HashMap<(i32, i64), (u32, String)>,
    /// Messages delivered per consumer.
    pub per_consumer: [u64; CONSUMERS],
    /// Latest assignment per live consumer: (generation, partitions).
    assigned: BTreeMap<usize, (i32, Vec<i32>)>,
    /// Consumers that are gone.
    dead: BTreeSet<usize>,
    /// Partitions the killed consumer owned when it was killed.
    pub victim_partitions: BTreeSet<i32>,
    /// Rebalances, in order.
    pub rebalances: Vec<Rebalance>,
}

impl Watch {
    fn new(total: usize) -> Watch {
        Watch {
            total,
            produced: HashMap::new(),
            consumed: HashMap::new(),
            per_consumer: [0; CONSUMERS],
            assigned: BTreeMap::new(),
            dead: BTreeSet::new(),
            victim_partitions: BTreeSet::new(),
            rebalances: Vec::new(),
        }
    }

    fn on_produced(&mut self, batch: Produced) {
        for (line, partition, offset) in batch {
            self.produced.insert((partition, offset), line);
        }
    }

    fn on_seen(&mut self, event: Seen) {
        match event {
            Seen::Record {
                consumer,
                partition,
                offset,
                value,
            } => {
                self.per_consumer[consumer] += 1;
                let entry = self
                    .consumed
                    .entry((partition, offset))
                    .or_insert((0, value));
                entry.0 += 1;
            }
            Seen::Assigned {
                consumer,
                generation,
                partitions,
                at,
            } => {
                if self.dead.contains(&consumer) {
                    return;
                }
                self.assigned.insert(consumer, (generation, partitions));
                if let Some(g) = self.stable_generation() {
                    if let Some(r) = self.rebalances.last_mut() {
                        if r.completed.is_none() && r.generation.is_none_or(|old| g > old) {
                            r.complete(g, at);
                        }
                    }
                }
            }
            Seen::Exited { consumer } => {
                self.dead.insert(consumer);
                self.assigned.remove(&consumer);
            }
        }
    }

    fn kill(&mut self, consumer: usize) {
        if let Some((g, partitions)) = self.assigned.remove(&consumer) {
            self.victim_partitions = partitions.into_iter().collect();
            if let Some(r) = self.rebalances.last_mut() {
                r.generation.get_or_insert(g);
            }
        }
        self.dead.insert(consumer);
    }

    /// The generation every live consumer holds, if they agree and together own every
    /// partition exactly once.
    pub(crate) fn stable_generation(&self) -> Option<i32> {
        let live: Vec<&(i32, Vec<i32>)> = self
            .assigned
            .iter()
            .filter(|(c, _)| !self.dead.contains(c))
            .map(|(_, a)| a)
            .collect();
        if live.len() + self.dead.len() < CONSUMERS {
            return None;
        }
        let g = live.first()?.0;
        if live.iter().any(|(gen, _)| *gen != g) {
            return None;
        }
        let mut all: Vec<i32> = live.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        all.sort_unstable();
        let before = all.len();
        all.dedup();
        (before == all.len() && all.len() == PARTITIONS as usize).then_some(g)
    }

    /// Distinct messages delivered.
    pub(crate) fn consumed_unique(&self) -> usize {
        self.consumed.len()
    }

    fn display(&self, tty: bool, victim: Option<usize>) {
        let per: Vec<String> = self
            .per_consumer
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mark = if Some(i) == victim { " killed" } else { "" };
                format!("c{} {n}{mark}", i + 1)
            })
            .collect();
        let generation = self
            .stable_generation()
            .map_or_else(|| "rebalancing".to_owned(), |g| format!("generation {g}"));
        let text = format!(
            "produced {}/{}  consumed {} ({})  {generation}",
            self.produced.len(),
            self.total,
            self.consumed_unique(),
            per.join(", ")
        );
        let mut out = std::io::stdout().lock();
        if tty {
            let _ = write!(out, "\r\x1b[2K{text}");
        } else {
            let _ = writeln!(out, "{text}");
        }
        let _ = out.flush();
    }
}
