//! The `drover` command line.

mod cli;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand, ValueEnum};
use drover_host::{
    config::Config,
    logging,
    plugins::{Loader, LoaderOptions, PluginRegistry},
    startup,
};

/// Drover: a Kafka-compatible broker host whose group coordinator, partition assignors
/// and offset stores are plugins.
#[derive(Parser)]
#[command(name = "drover", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker: the Kafka listener, the admin API and the configured plugins.
    /// Logs one `drover ready` line when it serves; SIGTERM or Ctrl-C stops it
    /// gracefully with a final flush.
    Serve(ServeArgs),
    /// Join a consumer group with the native protocol (drover-client) and print every
    /// message read, one line each; Ctrl-C or SIGTERM commits and leaves the group.
    /// Membership events go to stderr.
    Consume(Box<ConsumeArgs>),
    /// The main job: a broker with the coordinator, sticky assignor and embedded offset
    /// store; the lines of real files produced with a Kafka client; a group of three
    /// `drover consume` processes, one killed midway; a live progress line and a
    /// summary. Exits 1 if any line is missing or committed offsets are not at the log
    /// end.
    Demo(DemoArgs),
    /// Talk to a running broker's admin API.
    Admin {
        /// The admin listener: HOST:PORT, or https://HOST:PORT for TLS (with --ca-file).
        #[arg(long, default_value = "127.0.0.1:9644", global = true)]
        admin: String,
        #[command(flatten)]
        credentials: cli::admin::Credentials,
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Inspect the plugin directory.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The config file (`drover.toml`); flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Kafka listener, HOST:PORT (default 127.0.0.1:9092): sets `server.listen`, the
    /// one PLAINTEXT listener; not with `server.listeners` in the config.
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Admin HTTP listener, HOST:PORT (default 127.0.0.1:9644).
    #[arg(long)]
    admin_listen: Option<std::net::SocketAddr>,
    /// Data directory (default ./drover-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Plugin directory (default ./plugins).
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
    /// This broker's id (cluster mode: unique per broker; default 0).
    #[arg(long)]
    broker_id: Option<i32>,
    /// Run in cluster mode with this ZooKeeper ensemble: one or more HOST:PORT,
    /// comma-separated, optionally followed by /chroot.
    #[arg(long)]
    zookeeper: Option<String>,
    /// Start on the offset store drover.toml names even when a swap made another store
    /// active (recorded in <data_dir>/offset_store.json): the record is removed and
    /// nothing is copied, so offsets committed to that store since are not served.
    #[arg(long)]
    use_configured_offset_store: bool,
}

#[derive(clap::Args)]
struct ConsumeArgs {
    /// Bootstrap brokers, HOST:PORT, comma-separated.
    #[arg(long, default_value = "127.0.0.1:9092", value_delimiter = ',')]
    brokers: Vec<String>,
    /// The consumer group.
    #[arg(long)]
    group: String,
    /// A topic to read, as TOPIC or TOPIC:STREAMS; repeatable.
    #[arg(long = "topic", conflicts_with_all = ["whitelist", "blacklist"])]
    topics: Vec<String>,
    /// Read every topic whose name matches this regular expression.
    #[arg(long, conflicts_with = "blacklist")]
    whitelist: Option<String>,
    /// Read every topic whose name does not match this regular expression.
    #[arg(long)]
    blacklist: Option<String>,
    /// Streams for a whitelist or blacklist subscription.
    #[arg(long, default_value_t = 1)]
    streams: usize,
    /// This consumer's id in the group (default: the group id, a dash and a random suffix).
    #[arg(long)]
    consumer_id: Option<String>,
    /// Session timeout, ms.
    #[arg(long, default_value_t = 10_000)]
    session_timeout_ms: i32,
    /// Where partitions without a committed offset start: earliest, latest or none.
    #[arg(long, default_value = "earliest")]
    reset: String,
    /// Assignor to ask for (default: the coordinator's).
    #[arg(long)]
    assignor: Option<String>,
    /// This consumer's rack (Kafka's `client.rack`), for rack-aware assignors. Sent in
    /// RegisterConsumer v1, like --weight and --label (docs/protocol.md §5.1).
    #[arg(long)]
    rack: Option<String>,
    /// This consumer's capacity relative to the group's other members (≥ 1): a
    /// weight-aware assignor gives weight 2 about twice the work of weight 1.
    #[arg(long, default_value_t = 1)]
    weight: u32,
    /// A free-form label for the assignor, KEY=VALUE; repeatable (at most 32).
    #[arg(long = "label")]
    labels: Vec<String>,
    /// Pause before registering again after a fetcher died (offset out of range or no
    /// committed offset under --reset none), ms; doubles while it keeps dying.
    #[arg(long, default_value_t = 1_000)]
    fetcher_failure_backoff_ms: u64,
    /// Cap of --fetcher-failure-backoff-ms, ms.
    #[arg(long, default_value_t = 60_000)]
    fetcher_failure_backoff_max_ms: u64,
    /// Commit consumed offsets this often, ms (0: only at exit; Heartbeat answers carry
    /// them anyway).
    #[arg(long, default_value_t = 5_000)]
    auto_commit_interval_ms: u64,
    /// Commit explicitly (Kafka's enable.auto.commit=false): Heartbeat answers carry no
    /// offsets and nothing is committed periodically; processed offsets are handed
    /// over at every StopFetcher and committed at exit.
    #[arg(long)]
    no_auto_commit: bool,
    /// Line format: offsets (`topic partition offset`), values, or full (`topic
    /// partition offset key value`).
    #[arg(long, default_value = "full")]
    format: String,
    /// Exit (commit and leave) after this many messages.
    #[arg(long)]
    max_messages: Option<u64>,
    /// Exit (commit and leave) after this long without a message, ms.
    #[arg(long)]
    idle_exit_ms: Option<u64>,
    /// The brokers' listener protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    /// (Kafka's security.protocol).
    #[arg(long, default_value = "PLAINTEXT")]
    security_protocol: String,
    /// PEM file of the CA the brokers' certificates chain to (SSL, SASL_SSL).
    #[arg(long)]
    ssl_ca_location: Option<PathBuf>,
    /// PEM file of this client's certificate chain, for listeners that ask for one
    /// (mTLS); with --ssl-key-location.
    #[arg(long, requires = "ssl_key_location")]
    ssl_certificate_location: Option<PathBuf>,
    /// PEM file of this client's private key.
    #[arg(long, requires = "ssl_certificate_location")]
    ssl_key_location: Option<PathBuf>,
    /// SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN (SASL_PLAINTEXT, SASL_SSL).
    #[arg(long, default_value = "SCRAM-SHA-512")]
    sasl_mechanism: String,
    /// SASL user name.
    #[arg(long)]
    sasl_username: Option<String>,
    /// A file whose first line is the SASL password (never on the command line).
    #[arg(long)]
    sasl_password_file: Option<PathBuf>,
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Plugin directory (default: `plugins` next to the drover binary, where
    /// scripts/build.sh installs them).
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
    /// Broker data directory (default: a fresh temporary directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// An input file whose lines are produced; repeatable (default: every file in
    /// /usr/share/common-licenses).
    #[arg(long = "input")]
    inputs: Vec<PathBuf>,
    /// Lines produced per second.
    #[arg(long, default_value_t = 800)]
    rate: u32,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// The active offset store and the state of a swap.
    OffsetStore {
        #[command(subcommand)]
        command: OffsetStoreCommand,
    },
    /// Cluster mode: live brokers, coordinator slot owners, topic placement.
    Cluster,
    /// Consumer groups (`GET /v1/groups`, or one group with its members and lag).
    Groups {
        /// One group.
        group: Option<String>,
    },
    /// Transactions: the coordinator's transactional ids, those open in this broker's
    /// partitions, and aborting a hanging one (Kafka's `kafka-transactions.sh`).
    Transactions {
        #[command(subcommand)]
        command: Option<TransactionsCommand>,
    },
    /// SCRAM credentials (KIP-554): offline on a stopped broker's data directory
    /// (`--data-dir`, how the first one is made), or through a running broker's Kafka
    /// listener (`--bootstrap`, also in cluster mode). Passwords are read from
    /// `--password-file` or standard input, never from the command line.
    Users {
        /// A stopped standalone broker's data directory.
        #[arg(long, global = true, conflicts_with = "bootstrap")]
        data_dir: Option<PathBuf>,
        /// A running broker's Kafka listener, HOST:PORT (PLAINTEXT).
        #[arg(long, global = true)]
        bootstrap: Option<String>,
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// ACLs of the configured authorizer (issue 30) through a running broker's Kafka
    /// listener (DescribeAcls, CreateAcls, DeleteAcls, as kafka-acls.sh): list, add,
    /// remove. The listener must be PLAINTEXT and its principal allowed Describe/Alter
    /// on the cluster (a super user: User:ANONYMOUS on a loopback admin listener).
    Acls {
        /// A running broker's Kafka listener, HOST:PORT (PLAINTEXT).
        #[arg(long, global = true)]
        bootstrap: Option<String>,
        #[command(subcommand)]
        command: AclsCommand,
    },
}

/// The resource and entry of an ACL on the command line.
#[derive(clap::Args)]
struct AclArgs {
    /// A topic (name or, with --pattern prefixed, prefix; `*` for every topic).
    #[arg(long)]
    topic: Option<String>,
    /// A consumer group.
    #[arg(long)]
    group: Option<String>,
    /// A transactional id.
    #[arg(long)]
    transactional_id: Option<String>,
    /// The cluster (`kafka-cluster`).
    #[arg(long)]
    cluster: bool,
    /// literal (default for add and remove), prefixed; any or match for list.
    #[arg(long)]
    pattern: Option<String>,
    /// The principal, `User:NAME` (`User:*`: everyone).
    #[arg(long)]
    principal: Option<String>,
    /// The client host (`*`: any, the default for add).
    #[arg(long)]
    host: Option<String>,
    /// read, write, create, delete, alter, describe, cluster-action, describe-configs,
    /// alter-configs, idempotent-write, all.
    #[arg(long)]
    operation: Option<String>,
    /// A DENY entry (default ALLOW).
    #[arg(long)]
    deny: bool,
}

impl AclArgs {
    fn split(self) -> (cli::acls::Resource, cli::acls::Entry) {
        (
            cli::acls::Resource {
                topic: self.topic,
                group: self.group,
                transactional_id: self.transactional_id,
                cluster: self.cluster,
                pattern: self.pattern,
            },
            cli::acls::Entry {
                principal: self.principal,
                host: self.host,
                operation: self.operation,
                deny: self.deny,
            },
        )
    }
}

#[derive(Subcommand)]
enum AclsCommand {
    /// List the ACLs matching what is given (all when nothing is).
    List(AclArgs),
    /// Add one ACL.
    Add(AclArgs),
    /// Remove the ACLs matching what is given.
    Remove(AclArgs),
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Add or replace a user's credential for one mechanism.
    Add {
        /// The user name.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// PBKDF2 iterations, 4096 to 16384. Use one value for every user: an unusual
        /// count tells a user apart from unknown ones.
        #[arg(long, default_value_t = 8192)]
        iterations: i32,
        /// Read the password from the first line of this file instead of standard input.
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// Delete a user's credential for one mechanism.
    Delete {
        /// The user name.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long)]
        mechanism: String,
    },
    /// List users with their mechanisms and iterations (all users when none is named).
    List {
        /// Users to describe.
        users: Vec<String>,
    },
}

#[derive(Subcommand)]
enum TransactionsCommand {
    /// The transaction coordinator's transactional ids (JSON; the default).
    List,
    /// Transactions open in the partitions this broker leads (JSON); `--hanging`: only
    /// those nothing will end, which hold read_committed consumers back.
    Partitions {
        /// Only hanging transactions.
        #[arg(long)]
        hanging: bool,
    },
    /// End a hanging transaction in one partition with an abort marker; no data is
    /// deleted, read_committed consumers skip its records. Refused while its
    /// transaction coordinator still has it open.
    Abort {
        /// The topic.
        #[arg(long)]
        topic: String,
        /// The partition.
        #[arg(long)]
        partition: i32,
        /// The producer id whose transaction hangs (from `partitions --hanging`).
        #[arg(long)]
        producer_id: i64,
    },
}

#[derive(Subcommand)]
enum OffsetStoreCommand {
    /// Print the active store and the last swap's status (JSON).
    Status,
    /// Swap the active offset store on the running broker, under load, losing no
    /// commit: open NAME with the config file, write to both, copy every offset, switch
    /// reads, close the old store. Waits until it completes (exit 0) or fails (exit 1;
    /// the broker stays on the old store).
    Swap {
        /// The offset-store plugin to switch to.
        #[arg(long)]
        to: String,
        /// Its TOML config file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Return once the swap started.
        #[arg(long)]
        no_wait: bool,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Load every `*.so` in the plugin directory and print what was found. Exits 0 even
    /// when some files are refused (each refusal says why); exits 1 when the plugin
    /// directory cannot be read or the plugin cache directory is unsafe.
    List {
        #[command(flatten)]
        source: PluginSource,
        /// Ask a running broker instead (its admin API, `GET /v1/plugins`, HOST:PORT or
        /// https://HOST:PORT): the directory as that broker has it, with each assignor's
        /// `slow` state (a call running past `coordinator.assignor_timeout_ms`).
        #[arg(long)]
        admin: Option<String>,
        #[command(flatten)]
        credentials: cli::admin::Credentials,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Do what broker startup does with plugins: load the directory, require every
    /// plugin in `plugins.required`, start every assignor (a failure is fatal only for a
    /// required one) and open every required offset store, each with its
    /// `[plugins.config.<name>]` table. Exits 1 with the first fatal error.
    Check {
        #[command(flatten)]
        source: PluginSource,
    },
    /// Run the conformance suite of a plugin file's kind against it (loaded with every
    /// startup check) and print one line per property: `PASS name`, `FAIL name: why`
    /// or `SKIP name: why`. Exits 1 on a failure or a refused file, 3 for a
    /// coordinator (no suite yet).
    Test(drover_host::plugin_test::TestArgs),
    /// The committing child of `plugins test`'s crash-safety check.
    #[command(hide = true)]
    TestCrashChild(drover_host::plugin_test::CrashChildArgs),
    /// Ask a running broker (its admin API, `POST /v1/plugins/rescan`) to load the
    /// plugin files added or replaced since it started, with every startup check, and
    /// print what changed and every refused file with its reason. Exits 0 when the
    /// rescan ran (even if files were refused: nothing changed because of them), 1 when
    /// it could not (the broker is unreachable, the directory unreadable).
    Rescan {
        /// The broker's admin listener: HOST:PORT, or https://HOST:PORT for TLS (with
        /// --ca-file).
        #[arg(long, default_value = "127.0.0.1:9644")]
        admin: String,
        #[command(flatten)]
        credentials: cli::admin::Credentials,
        /// Output format: a readable summary, or the admin API's JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

#[derive(clap::Args)]
struct PluginSource {
    /// The config file (`drover.toml`); its `[plugins]` table is used.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The plugin directory; overrides `plugins.dir`.
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// An aligned table.
    Table,
    /// One JSON object per file, one per line.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Plugins { .. } | Command::Admin { .. }) {
        // Commands that print a report exit quietly when their reader goes away
        // (`drover plugins rescan | head -1`), as Unix tools do, instead of panicking on
        // a write error. Not `serve` (a closed socket must be an error, not a signal)
        // and not `consume` (it commits and leaves its group on the way out).
        // SAFETY: called before any thread is started; SIG_DFL is always valid.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Command::Demo(_)
        | Command::Consume(_)
        | Command::Admin { .. }
        | Command::Plugins {
            command: PluginsCommand::Rescan { .. },
        } => logging::init_with_default("warn"),
        Command::Plugins {
            command: PluginsCommand::Test(_) | PluginsCommand::TestCrashChild(_),
        } => logging::init_with_default("warn"),
        _ => logging::init(),
    }
    let result = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Consume(args) => consume(*args),
        Command::Demo(args) => demo(args),
        Command::Admin {
            admin,
            credentials,
            command,
        } => admin_command(&admin, &credentials, command),
        Command::Plugins { command } => match command {
            PluginsCommand::List {
                source,
                admin,
                credentials,
                format,
            } => match admin {
                Some(admin) => cli::admin::Target::new(&admin, &credentials).and_then(|target| {
                    cli::admin::plugins_list(&target, matches!(format, Format::Json))
                }),
                None => list(source, format),
            },
            PluginsCommand::Check { source } => check(source),
            PluginsCommand::Test(args) => return drover_host::plugin_test::run(args),
            PluginsCommand::TestCrashChild(args) => {
                return drover_host::plugin_test::crash_child(args)
            }
            PluginsCommand::Rescan {
                admin,
                credentials,
                format,
            } => cli::admin::Target::new(&admin, &credentials).and_then(|target| {
                cli::admin::plugins_rescan(&target, matches!(format, Format::Json))
            }),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let mut config = match &args.config {
        Some(path) => Config::load(path).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    if let Some(admin) = args.admin_listen {
        config.server.admin_listen = admin;
    }
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    if let Some(dir) = args.plugin_dir {
        config.plugins.dir = dir;
    }
    if let Some(id) = args.broker_id {
        config.server.broker_id = id;
    }
    if let Some(zk) = args.zookeeper {
        config.zookeeper.apply_flag(&zk);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("drover")
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime
        .block_on(drover_host::serve::run(
            config,
            drover_host::serve::StartOptions {
                use_configured_offset_store: args.use_configured_offset_store,
            },
        ))
        .map_err(|e| e.to_string())
}

fn admin_command(
    admin: &str,
    credentials: &cli::admin::Credentials,
    command: AdminCommand,
) -> Result<(), String> {
    use cli::admin as admin_cli;
    // Made when a command talks to the admin API (`users` does not).
    let target = || admin_cli::Target::new(admin, credentials);
    match command {
        AdminCommand::OffsetStore { command } => match command {
            OffsetStoreCommand::Status => admin_cli::offset_store_status(&target()?),
            OffsetStoreCommand::Swap {
                to,
                config,
                no_wait,
            } => {
                let text = match config {
                    Some(path) => std::fs::read_to_string(&path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                    None => String::new(),
                };
                admin_cli::offset_store_swap(&target()?, &to, &text, !no_wait)
            }
        },
        AdminCommand::Transactions { command } => match command {
            None | Some(TransactionsCommand::List) => {
                admin_cli::get(&target()?, "/v1/transactions")
            }
            Some(TransactionsCommand::Partitions { hanging }) => {
                admin_cli::transactions_in_partitions(&target()?, hanging)
            }
            Some(TransactionsCommand::Abort {
                topic,
                partition,
                producer_id,
            }) => admin_cli::abort_transaction(&target()?, &topic, partition, producer_id),
        },
        AdminCommand::Acls { bootstrap, command } => {
            use cli::acls::{run, Action};
            let bootstrap = bootstrap.ok_or("--bootstrap HOST:PORT is required")?;
            let action = match command {
                AclsCommand::List(a) => {
                    let (r, e) = a.split();
                    Action::List(r, e)
                }
                AclsCommand::Add(a) => {
                    let (r, e) = a.split();
                    Action::Add(r, e)
                }
                AclsCommand::Remove(a) => {
                    let (r, e) = a.split();
                    Action::Remove(r, e)
                }
            };
            run(&bootstrap, action)
        }
        AdminCommand::Users {
            data_dir,
            bootstrap,
            command,
        } => {
            use cli::users::{self, Action, Target};
            let target = match (data_dir, bootstrap) {
                (Some(dir), None) => Target::DataDir(dir),
                (None, Some(addr)) => Target::Broker(addr),
                _ => {
                    return Err(
                        "name the credentials: --data-dir DIR (a stopped broker) or \
                         --bootstrap HOST:PORT (a running one)"
                            .into(),
                    )
                }
            };
            let action = match command {
                UsersCommand::Add {
                    user,
                    mechanism,
                    iterations,
                    password_file,
                } => Action::Add {
                    user,
                    mechanism: users::parse_mechanism(&mechanism)?,
                    iterations,
                    password_file,
                },
                UsersCommand::Delete { user, mechanism } => Action::Delete {
                    user,
                    mechanism: users::parse_mechanism(&mechanism)?,
                },
                UsersCommand::List { users } => Action::List { users },
            };
            users::run(target, action)
        }
        AdminCommand::Cluster | AdminCommand::Groups { .. } => {
            let path = match command {
                AdminCommand::Groups { group: Some(g) } => {
                    format!("/v1/groups/{}", admin_cli::encode_segment(&g))
                }
                AdminCommand::Groups { group: None } => "/v1/groups".to_owned(),
                _ => "/v1/cluster".to_owned(),
            };
            let (status, body) = admin_cli::http(&target()?, "GET", &path, None)?;
            println!("{body}");
            if status == 200 {
                Ok(())
            } else {
                Err(format!("HTTP {status}"))
            }
        }
    }
}

fn demo(args: DemoArgs) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the drover binary: {e}"))?;
    let plugin_dir = match args.plugin_dir {
        Some(dir) => dir,
        None => exe
            .parent()
            .map(|d| d.join("plugins"))
            .ok_or("cannot find the plugin directory; pass --plugin-dir")?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(cli::demo::run(cli::demo::DemoOptions {
        exe,
        plugin_dir,
        data_dir: args.data_dir,
        inputs: args.inputs,
        rate: args.rate,
    }))
}

fn consume(args: ConsumeArgs) -> Result<(), String> {
    use cli::consume::{self, ConsumeOptions, Output, Subscribe};
    let mut config = drover_client::ConsumerConfig::new(args.brokers, &args.group);
    if let Some(id) = args.consumer_id {
        config.consumer_id = id;
    }
    config.session_timeout_ms = args.session_timeout_ms;
    config.auto_offset_reset = consume::parse_reset(&args.reset)?;
    config.assignor = args.assignor;
    config.rack = args.rack;
    config.weight = args.weight;
    config.labels = args
        .labels
        .iter()
        .map(|l| consume::parse_label(l))
        .collect::<Result<_, _>>()?;
    config.auto_commit_interval_ms = args.auto_commit_interval_ms;
    config.enable_auto_commit = !args.no_auto_commit;
    config.fetcher_failure_backoff_ms = args.fetcher_failure_backoff_ms;
    config.fetcher_failure_backoff_max_ms = args.fetcher_failure_backoff_max_ms;
    config.security = consume::parse_security(consume::SecurityArgs {
        protocol: &args.security_protocol,
        ca: args.ssl_ca_location.as_deref(),
        client_cert: args
            .ssl_certificate_location
            .as_deref()
            .zip(args.ssl_key_location.as_deref()),
        mechanism: &args.sasl_mechanism,
        username: args.sasl_username.as_deref(),
        password_file: args.sasl_password_file.as_deref(),
    })?;
    let subscribe = match (args.whitelist, args.blacklist) {
        (Some(p), _) => Subscribe::Filter(drover_client::TopicFilter::Whitelist(p), args.streams),
        (_, Some(p)) => Subscribe::Filter(drover_client::TopicFilter::Blacklist(p), args.streams),
        (None, None) if args.topics.is_empty() => {
            return Err("name at least one --topic, or a --whitelist/--blacklist pattern".into())
        }
        (None, None) => Subscribe::Topics(
            args.topics
                .iter()
                .map(|t| consume::parse_topic(t))
                .collect::<Result<_, _>>()?,
        ),
    };
    if args.max_messages == Some(0) {
        return Err("--max-messages must be at least 1".into());
    }
    let output = match args.format.as_str() {
        "offsets" => Output::Offsets,
        "values" => Output::Values,
        "full" => Output::Full,
        other => {
            return Err(format!(
                "--format {other}: expected offsets, values or full"
            ))
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime
        .block_on(consume::run(ConsumeOptions {
            config,
            subscribe,
            output,
            max_messages: args.max_messages,
            idle_exit_ms: args.idle_exit_ms,
        }))
        .map_err(|e| e.to_string())
}

fn load_config(source: &PluginSource) -> Result<(Config, bool), String> {
    let mut config = match &source.config {
        Some(path) => Config::load(path).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    if let Some(dir) = &source.plugin_dir {
        config.plugins.dir = dir.clone();
    }
    Ok((config, source.config.is_some()))
}

/// Loader options for `list` and `check`. Without a config file there is no data
/// directory: keep verified copies in a private per-user temp directory instead of
/// creating ./drover-data.
fn plugin_loader_options(config: &Config, from_file: bool) -> LoaderOptions {
    let from_config = startup::loader_options(config);
    if from_file {
        from_config
    } else {
        LoaderOptions {
            allowlist: from_config.allowlist,
            ..LoaderOptions::temp_cache()
        }
    }
}

fn list(source: PluginSource, format: Format) -> Result<(), String> {
    let (config, from_file) = load_config(&source)?;
    let options = plugin_loader_options(&config, from_file);
    let registry = PluginRegistry::scan(&Loader::new(options), &config.plugins.dir)
        .map_err(|e| e.to_string())?;
    let rows = drover_host::plugins::table::rows(&registry);
    match format {
        Format::Table => print!("{}", drover_host::plugins::table::render(&rows)),
        Format::Json => {
            for row in rows {
                println!("{}", row.to_json());
            }
        }
    }
    Ok(())
}

fn check(source: PluginSource) -> Result<(), String> {
    let (config, from_file) = load_config(&source)?;
    let options = plugin_loader_options(&config, from_file);
    let plugins = startup::load_plugins_with(&config, options).map_err(|e| e.to_string())?;
    println!("{}", plugins.describe());
    // What `serve` treats as fatal when a coordinator runs: its default assignor, its
    // offset store, and its own config (the plugin is started once and dropped).
    let verdict = startup::check_coordinator(&config, &plugins);
    let closed = plugins.close().map_err(|e| e.to_string());
    verdict?;
    closed
}
