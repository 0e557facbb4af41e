//! `drover plugins test FILE.so`: the conformance suite of the file's kind
//! (`drover-plugin-testkit`) against a plugin loaded exactly as the broker loads it.
//!
//! The file goes through the normal [`Loader`] with every startup check (ownership and
//! modes, size, ELF, kind, ABI version, layout); a refused file is reported with the
//! loader's reason. Then:
//!
//! - an assignor: one instance, the assignor suite with the `--claims` the caller makes
//!   and `--cases` generated inputs per property;
//! - an offset store: the store suite, opening the store with `--config` for every
//!   instance (so a reopen sees the same data); then crash safety: `drover` runs itself
//!   as a child (`plugins test-crash-child`) that commits until it is killed with
//!   SIGKILL, and the store must hold the last acknowledged batch after a fresh open;
//! - an authorizer: one instance with `--config`, the authorizer suite. The suite cannot
//!   read a config, so the caller tells it what the config means: `--super-user P`, a
//!   principal the config makes a super user (without it `super_user` is skipped), and
//!   `--principal P`, one it leaves ordinary (default `User:drover-testkit`). The ACL
//!   properties run only when the authorizer keeps ACLs;
//! - a coordinator: no suite yet (exit status 3).
//!
//! One line per property on standard output, `PASS name`, `FAIL name: why` or
//! `SKIP name: why`. Exit status 0 when nothing failed, 1 on a failure or a refused
//! file, 2 on a usage error, 3 for a kind without a suite. In `--config`, `{tmp}` stands for a fresh
//! temporary directory, removed afterwards (`path = "{tmp}/offsets.redb"`).

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
    time::Duration,
};

use drover_abi::{offset_store::OffsetStoreArc, PluginError, PluginKind};
use drover_plugin_testkit::{
    assignor::{self, Claims},
    authorizer,
    offset_store::{self, crash},
    Report, Verdict,
};

use crate::plugins::{LoadError, LoadedPlugin, Loader, LoaderOptions};

/// Exit status for a plugin kind without a conformance suite.
const NO_SUITE: u8 = 3;

/// Partitions the crash-safety child commits in every batch.
const CRASH_KEYS: i32 = 16;

/// Acknowledged batches the crash-safety child reports before it is killed.
const CRASH_ACKS: i64 = 200;

/// Options of `drover plugins test`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// The plugin file.
    pub file: PathBuf,
    /// The plugin's config string (what its `[plugins.config.<name>]` table would be),
    /// as TOML; `{tmp}` is replaced by a fresh temporary directory.
    #[arg(long, default_value = "")]
    pub config: String,
    /// What an assignor claims beyond the contract, comma-separated: `balanced`
    /// (identical subscriptions give loads within one), `sticky` (owned partitions
    /// stay where balance allows). Unclaimed properties are skipped.
    #[arg(long, default_value = "")]
    pub claims: Claims,
    /// Generated inputs per assignor property, and generated action lists per
    /// authorizer property (proptest cases).
    #[arg(long, default_value_t = 64)]
    pub cases: u32,
    /// An offset store's metadata limit in bytes (Kafka's `offset.metadata.max.bytes`),
    /// if its config changes it.
    #[arg(long, default_value_t = 4096)]
    pub max_metadata_bytes: usize,
    /// An authorizer's super user: a principal (`User:admin`) that the given `--config`
    /// makes a super user. Without it the `super_user` property is skipped.
    #[arg(long, value_name = "PRINCIPAL")]
    pub super_user: Option<String>,
    /// An authorizer's ordinary principal: one the given `--config` does not make a
    /// super user (nor allow everything).
    #[arg(long, value_name = "PRINCIPAL", default_value = authorizer::DEFAULT_PRINCIPAL)]
    pub principal: String,
}

/// Options of the hidden `drover plugins test-crash-child` (the crash-safety child).
#[derive(clap::Args, Debug)]
pub struct CrashChildArgs {
    /// The offset-store plugin file.
    pub file: PathBuf,
    /// Its config string, placeholders already replaced.
    #[arg(long)]
    pub config: String,
    /// The group to commit to.
    #[arg(long)]
    pub group: String,
    /// Partitions per batch.
    #[arg(long)]
    pub keys: i32,
}

/// Runs `drover plugins test`; see the module docs for the exit status.
pub fn run(args: TestArgs) -> ExitCode {
    let tmp = match tempfile::Builder::new()
        .prefix("drover-plugin-test-")
        .tempdir()
    {
        Ok(tmp) => tmp,
        Err(e) => return refuse(format!("cannot create a temporary directory: {e}")),
    };
    let config = args.config.replace("{tmp}", &tmp.path().to_string_lossy());
    let plugin = match load(&args.file) {
        Ok(plugin) => plugin,
        Err(e) => return refuse(e.to_string()),
    };
    let summary = &plugin.summary;
    println!(
        "{} {} `{}` {} ({} ABI {}; this broker serves {})",
        args.file.display(),
        summary.kind,
        summary.name,
        summary.version,
        summary.kind,
        summary.abi,
        summary.kind.abi_version()
    );
    let report = match summary.kind {
        PluginKind::Assignor => match plugin.new_assignor(&config) {
            Ok(handle) => {
                let options = assignor::Options::new(args.claims).cases(args.cases);
                let instance = handle.instance();
                let mut report = assignor::run(&instance, &options);
                // A share assignor (assignor ABI 3.3) meets the share contract too.
                if instance.share_groups_supported() {
                    report
                        .outcomes
                        .extend(assignor::share::run(&instance, &options).outcomes);
                }
                report
            }
            Err(e) => return refuse(e.to_string()),
        },
        PluginKind::OffsetStore => {
            let options =
                offset_store::Options::default().max_metadata_bytes(args.max_metadata_bytes);
            let open = || open_store(&plugin, &config);
            let mut report = offset_store::run(&open, &options);
            if matches!(report.verdict("open"), Some(Verdict::Pass)) {
                report.record("crash_safety", crash_safety(&args.file, &config, &open));
            } else {
                report.push(
                    "crash_safety",
                    Verdict::Skip("the store did not open".into()),
                );
            }
            report
        }
        PluginKind::Authorizer => match plugin.new_authorizer(&config, None) {
            Ok(handle) => {
                let mut options = authorizer::Options::default()
                    .principal(args.principal)
                    .cases(args.cases);
                if let Some(su) = args.super_user {
                    options = options.super_user(su);
                }
                authorizer::run(&handle.instance(), &options)
            }
            Err(e) => return refuse(e.to_string()),
        },
        PluginKind::Coordinator => {
            println!(
                "{} plugins have no conformance suite yet; the file passed the loader's checks",
                summary.kind
            );
            return ExitCode::from(NO_SUITE);
        }
    };
    finish(&report)
}

/// Runs the hidden crash-safety child: opens the store and commits until killed.
pub fn crash_child(args: CrashChildArgs) -> ExitCode {
    let result = load(&args.file)
        .map_err(|e| e.to_string())
        .and_then(|plugin| open_store(&plugin, &args.config).map_err(|e| e.to_string()))
        .and_then(|store| {
            let mut out = std::io::stdout().lock();
            crash::commit_until_killed(
                &store,
                &args.group,
                args.keys,
                &mut out,
                Duration::from_secs(60),
            )
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => refuse(e),
    }
}

/// Loads `file` with every startup check, the plugin cache in the per-user temp
/// directory (as `drover plugins list` without a config file).
fn load(file: &Path) -> Result<LoadedPlugin, LoadError> {
    Loader::new(LoaderOptions::temp_cache()).load(file, None)
}

fn open_store(plugin: &LoadedPlugin, config: &str) -> Result<OffsetStoreArc, PluginError> {
    match plugin.open_offset_store(config) {
        Ok(handle) => Ok(handle.instance()),
        Err(LoadError::Instantiate { error, .. }) => Err(error),
        Err(e) => Err(PluginError::internal(e.to_string())),
    }
}

/// `drover` itself as the committing child, then the check after SIGKILL.
fn crash_safety(
    file: &Path,
    config: &str,
    open: &(dyn Fn() -> Result<OffsetStoreArc, PluginError> + Sync),
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the drover binary: {e}"))?;
    let group = format!("{}-crash", offset_store::unique_prefix());
    let mut child = Command::new(exe);
    child
        .args(["plugins", "test-crash-child"])
        .arg(file)
        .args(["--config", config, "--group", &group, "--keys"])
        .arg(CRASH_KEYS.to_string());
    crash::crash_safety(&mut child, open, &group, CRASH_KEYS, CRASH_ACKS)
}

fn finish(report: &Report) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{report}");
    let _ = out.flush();
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn refuse(why: String) -> ExitCode {
    eprintln!("error: {why}");
    ExitCode::FAILURE
}
