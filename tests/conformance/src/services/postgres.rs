//! A real PostgreSQL server for tests: Debian's `postgresql` package (`initdb` and
//! `postgres` from `/usr/lib/postgresql/<version>/bin`) run on a free loopback port with
//! a temporary data directory, its Unix socket in that directory, and no password for
//! the superuser `postgres`.
//!
//! - [`PgServer::shared`]: one server per test process, started on first use. Tests
//!   share it and keep apart by using a table of their own each ([`unique_name`],
//!   [`PgServer::store_config`]).
//! - [`PgServer::start`]: a dedicated server that a test may [`PgServer::stop`],
//!   [`PgServer::restart`], [`PgServer::freeze`] and [`PgServer::thaw`]; shut down and
//!   removed when dropped.
//!
//! Authentication (`pg_hba.conf`): `postgres` connects without a password (over TCP on
//! loopback and the socket); every other role needs its SCRAM password on TCP, so tests
//! can check a wrong password ([`PgServer::create_role`]).
//!
//! PostgreSQL refuses to run as root. When the tests run as root (as in CI) `initdb` and
//! `postgres` run as the `postgres` system user the Debian package creates (the data
//! directory is chowned to it); otherwise as the current user.
//!
//! No server outlives the test process: `postgres` is the direct child (not `pg_ctl`,
//! which daemonizes), spawned with `PR_SET_PDEATHSIG(SIGQUIT)` (immediate shutdown: the
//! postmaster stops its backends too) from a spawner thread that lives as long as the
//! process (the signal follows the thread that forked), so the kernel stops the servers
//! even when the test process is killed. On a normal exit a libc `atexit` handler shuts
//! them down and removes their data directories; directories left by killed test
//! processes are removed by the next run.
//!
//! The servers run with `fsync = off`: the tests kill brokers, not machines, and an
//! acknowledged commit survives a killed client either way; it makes the suite faster.
//!
//! When the server binaries are not installed the first use panics with a message
//! saying to run `scripts/install-test-deps.sh`.
//!
//! This file depends only on `std`, `libc` and `tempfile`: the `postgres` plugin's own
//! tests include it by path (`#[path]`), so it must stay self-contained.

use std::{
    net::{Ipv4Addr, TcpListener},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Mutex, MutexGuard, OnceLock, PoisonError,
    },
    time::{Duration, Instant},
};

/// Where Debian installs the server binaries, one directory per major version.
pub const PG_LIB_DIR: &str = "/usr/lib/postgresql";
/// How long a server may take to accept connections.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The name prefix of the servers' temporary directories (`<prefix><pid>-<random>`).
const DIR_PREFIX: &str = "drover-pg-";
/// The superuser, who connects without a password.
pub const SUPERUSER: &str = "postgres";

/// A PostgreSQL server run by the tests.
pub struct PgServer {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    run_as: Option<(libc::uid_t, libc::gid_t)>,
    child: Mutex<Option<Child>>,
    /// Extra server settings, after the defaults (so they override them).
    settings: Vec<(String, String)>,
    /// Owns `dir` for a dedicated server (the shared one's is removed at exit).
    _temp: Option<tempfile::TempDir>,
}

impl PgServer {
    /// The server shared by every test of this process, started on first use.
    pub fn shared() -> &'static PgServer {
        static SHARED: OnceLock<PgServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            remove_stale_dirs();
            let temp = new_temp_dir();
            let dir = temp.keep();
            register_dir_cleanup(&dir);
            PgServer::launch(dir, None, Vec::new())
        })
    }

    /// A dedicated server, for tests that stop, restart or freeze it. Shut down and
    /// removed on drop.
    pub fn start() -> PgServer {
        PgServer::start_with_settings(&[])
    }

    /// A dedicated server started with `settings` (`-c name=value`) after the test
    /// defaults (`fsync = off`, `full_page_writes = off`, `shared_buffers = 32MB`, ...),
    /// so they override them: e.g. `[("fsync", "on"), ("full_page_writes", "on")]` for a
    /// benchmark of durable commits. Shut down and removed on drop.
    pub fn start_with_settings(settings: &[(&str, &str)]) -> PgServer {
        let temp = new_temp_dir();
        let dir = temp.path().to_owned();
        let settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PgServer::launch(dir, Some(temp), settings)
    }

    fn launch(
        dir: PathBuf,
        temp: Option<tempfile::TempDir>,
        settings: Vec<(String, String)>,
    ) -> PgServer {
        let bin = bin_dir();
        let run_as = run_as();
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("chown {} to postgres: {e}", dir.display()));
        }
        init_cluster(&bin, &dir, run_as);
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match spawn_server(&bin, &dir, port, run_as, &settings) {
                Ok(child) => {
                    return PgServer {
                        port,
                        dir,
                        bin,
                        run_as,
                        child: Mutex::new(Some(child)),
                        settings,
                        _temp: temp,
                    }
                }
                // Most likely the port was taken between choosing and binding it.
                Err(e) => last_error = e,
            }
        }
        panic!("cannot start PostgreSQL: {last_error}");
    }

    /// The server's TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://user[:password]@127.0.0.1:<port>/database`.
    pub fn url(&self, user: &str, password: Option<&str>, database: &str) -> String {
        let password = password.map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "postgres://{user}{password}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// The superuser's URL for database `postgres`.
    pub fn superuser_url(&self) -> String {
        self.url(SUPERUSER, None, "postgres")
    }

    /// The config of a fresh `postgres` offset store on this server: the superuser's URL
    /// and a table of its own ([`unique_name`]).
    pub fn store_config(&self) -> String {
        format!(
            "url = {:?}\ntable = {:?}\n",
            self.superuser_url(),
            unique_name("offsets")
        )
    }

    /// A `psql` command running `sql` as the superuser in `database` (unaligned, tuples
    /// only, stopping at the first error), to run in the background.
    pub fn psql_command(&self, database: &str, sql: &str) -> Command {
        let mut command = Command::new(self.bin.join("psql"));
        command
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                SUPERUSER,
                "-d",
                database,
            ])
            .args(["-c", sql])
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null());
        command
    }

    /// Runs `sql` with `psql` as the superuser in `database`; returns its output
    /// (unaligned, tuples only) or, on failure, its error output.
    pub fn try_psql(&self, database: &str, sql: &str) -> Result<String, String> {
        let out = self
            .psql_command(database, sql)
            .output()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Like [`PgServer::try_psql`], panicking on failure.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        self.try_psql(database, sql)
            .unwrap_or_else(|e| panic!("psql {sql:?} failed: {e}"))
    }

    /// Creates a login role that must give `password` (SCRAM) over TCP.
    pub fn create_role(&self, name: &str, password: &str) {
        self.psql(
            "postgres",
            &format!("CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'"),
        );
    }

    /// Stops the server the way `pg_ctl stop -m fast` does (SIGINT: sessions are ended
    /// with an error, the data is checkpointed) and waits for it to exit. A no-op when
    /// it is stopped.
    pub fn stop(&self) {
        let child = self.slot().take();
        if let Some(mut child) = child {
            unregister_pid(child.id());
            signal_tree(child.id(), libc::SIGCONT); // in case it is frozen
                                                    // SAFETY: a plain syscall on our own child's pid, not yet reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(30);
            while matches!(child.try_wait(), Ok(None)) {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.wait();
        }
    }

    /// Starts the stopped server again, on the same port with the same data, and waits
    /// until it accepts connections. Panics if it does not come up.
    pub fn restart(&self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match spawn_server(&self.bin, &self.dir, self.port, self.run_as, &self.settings) {
                Ok(child) => {
                    *self.slot() = Some(child);
                    return;
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restarting PostgreSQL on port {}: {e}; retrying", self.port);
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("cannot restart PostgreSQL: {e}"),
            }
        }
    }

    /// Stops every process of the server (SIGSTOP): connections stay open, but nothing
    /// answers. Returns once all of them are stopped; see `freeze_tree`. Undo with
    /// [`PgServer::thaw`] (so does [`PgServer::stop`] and drop).
    pub fn freeze(&self) {
        if let Some(child) = self.slot().as_ref() {
            freeze_tree(child.id());
        }
    }

    /// Resumes a frozen server (SIGCONT).
    pub fn thaw(&self) {
        if let Some(child) = self.slot().as_ref() {
            signal_tree(child.id(), libc::SIGCONT);
        }
    }

    /// Whether the server is running (started and not stopped).
    pub fn is_running(&self) -> bool {
        self.slot().is_some()
    }

    /// The server's directory (`data/`, the socket, `postgres.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn slot(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A name no other store instance of this test run uses: `<prefix>_<pid>_<n>`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The newest `/usr/lib/postgresql/<version>/bin` with `initdb` and `postgres`.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(PG_LIB_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("postgres").is_file() && bin.join("initdb").is_file())
                .then_some((version, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL server binaries not found ({PG_LIB_DIR}/<version>/bin/postgres and \
             initdb); run scripts/install-test-deps.sh (it installs the Debian package \
             `postgresql`)"
        ),
    }
}

/// The `postgres` system user's uid and gid when running as root (PostgreSQL refuses to
/// run as root), `None` otherwise.
fn run_as() -> Option<(libc::uid_t, libc::gid_t)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").expect("no NUL");
    // SAFETY: getpwnam with a valid C string; the result is read at once, before any
    // other getpw* call (test setup is not racing other getpw* users).
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        panic!(
            "running as root, and there is no `postgres` user to run PostgreSQL as (it refuses \
             to run as root); run scripts/install-test-deps.sh (the Debian package `postgresql` \
             creates the user)"
        );
    }
    // SAFETY: `pw` is a valid passwd entry returned just above.
    unsafe { Some(((*pw).pw_uid, (*pw).pw_gid)) }
}

/// A command that runs as `run_as` (when set), in `dir`, without the caller's PG*
/// variables.
fn command_as(program: &Path, dir: &Path, run_as: Option<(libc::uid_t, libc::gid_t)>) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("PGDATA");
    if let Some((uid, gid)) = run_as {
        // SAFETY: runs in the forked child before exec and only calls async-signal-safe
        // functions (setgroups, setgid, setuid).
        unsafe {
            command.pre_exec(move || {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    command
}

/// `initdb` into `<dir>/data` (UTF-8, C locale, no fsync) and the test `pg_hba.conf`.
fn init_cluster(bin: &Path, dir: &Path, run_as: Option<(libc::uid_t, libc::gid_t)>) {
    let data = dir.join("data");
    let out = command_as(&bin.join("initdb"), dir, run_as)
        .args(["-D"])
        .arg(&data)
        .args([
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--locale=C",
            "--auth=trust",
            "-N",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.join("initdb").display()));
    if !out.status.success() {
        panic!(
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let hba = data.join("pg_hba.conf");
    std::fs::write(
        &hba,
        "# Written by the Drover test kit.\n\
         local all all trust\n\
         host all postgres 127.0.0.1/32 trust\n\
         host all all 127.0.0.1/32 scram-sha-256\n",
    )
    .unwrap_or_else(|e| panic!("write {}: {e}", hba.display()));
    std::fs::set_permissions(&hba, std::fs::Permissions::from_mode(0o600)).expect("chmod hba");
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(&hba, Some(uid), Some(gid)).expect("chown pg_hba.conf");
    }
}

/// Spawns `postgres` on `port` with its data in `<dir>/data` (and `settings` after the
/// default ones) and waits until it accepts connections. On failure the child is stopped
/// and the error carries the end of its log.
fn spawn_server(
    bin: &Path,
    dir: &Path,
    port: u16,
    run_as: Option<(libc::uid_t, libc::gid_t)>,
    settings: &[(String, String)],
) -> Result<Child, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("postgres.log"))
        .map_err(|e| format!("open log: {e}"))?;
    let log2 = log.try_clone().map_err(|e| format!("dup log: {e}"))?;
    let data = dir.join("data");
    let mut command = command_as(&bin.join("postgres"), dir, run_as);
    command
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "shared_buffers=32MB",
            "-c",
            "max_connections=200",
        ]);
    for (name, value) in settings {
        command.arg("-c").arg(format!("{name}={value}"));
    }
    command.stdin(Stdio::null()).stdout(log).stderr(log2);
    let mut child = spawn_tied_to_process(command)
        .map_err(|e| format!("cannot run {}: {e}", bin.join("postgres").display()))?;
    register_pid(child.id());
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let psql = bin.join("psql");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            unregister_pid(child.id());
            return Err(format!(
                "the server exited ({status}) on port {port}; its log ends with:\n{}",
                log_tail(dir)
            ));
        }
        // The data directory confirms the answer comes from this server, not from
        // another test process's server that holds the port.
        if answers(&psql, port).is_some_and(|d| Path::new(&d) == data) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            unregister_pid(child.id());
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "port {port} did not accept connections within {STARTUP_TIMEOUT:?}; log ends \
                 with:\n{}",
                log_tail(dir)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The data directory of the server on `port`, if it accepts the superuser.
fn answers(psql: &Path, port: u16) -> Option<String> {
    let out = Command::new(psql)
        .args(["-X", "-A", "-t", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-U",
            SUPERUSER,
            "-d",
            "postgres",
            "-c",
            "SHOW data_directory",
        ])
        .env("PGCONNECT_TIMEOUT", "2")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn new_temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
        .tempdir()
        .expect("temp dir for PostgreSQL")
}

/// Removes the directories of servers whose test process no longer exists (it was
/// killed before its `atexit` handler ran; the kernel stopped its servers).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("bind a free loopback port")
        .port()
}

/// Sends `signal` to process `pid` and to its children (the postmaster's backends).
fn signal_tree(pid: u32, signal: libc::c_int) {
    for p in std::iter::once(pid).chain(children(pid)) {
        // SAFETY: plain syscall; the pids are our server and its children.
        unsafe { libc::kill(p as libc::pid_t, signal) };
    }
}

/// State letter and parent of process `pid` (`/proc/<pid>/stat`), or None if it is gone.
fn proc_state(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...; comm may hold spaces, so split after the ')'.
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid))
}

/// The children of process `pid` (the postmaster's backends).
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|&p| proc_state(p).is_some_and(|(_, ppid)| ppid == pid))
        .collect()
}

/// Stops the postmaster `pid` and every backend, so that none keeps serving: listing
/// the children and then stopping them missed a backend forked in between. The
/// postmaster is stopped first and until it reads stopped (a stopped postmaster forks
/// nothing), then its children, again until none is left running.
fn freeze_tree(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    // Whether `p` is stopped (or gone); SIGSTOP it (again) if not.
    let stopped = |p: u32| match proc_state(p) {
        None | Some(('T' | 't' | 'Z' | 'X', _)) => true,
        Some(_) => {
            // SAFETY: plain syscall; `p` is our server or one of its children.
            unsafe { libc::kill(p as libc::pid_t, libc::SIGSTOP) };
            false
        }
    };
    while !stopped(pid) {
        assert!(
            Instant::now() < deadline,
            "PostgreSQL {pid} did not stop on SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    loop {
        let running: Vec<u32> = children(pid).into_iter().filter(|&c| !stopped(c)).collect();
        if running.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "PostgreSQL backends {running:?} did not stop on SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` from the spawner thread with `PR_SET_PDEATHSIG(SIGQUIT)`: the
/// server shuts down (immediately) when that thread, which lives as long as the
/// process, dies. The signal is set after `command_as` changed the user, since a
/// change of credentials clears it.
fn spawn_tied_to_process(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("postgres-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let parent = std::process::id();
                    // SAFETY: the closure runs in the forked child before exec and only
                    // calls async-signal-safe functions (prctl, getppid, _exit).
                    unsafe {
                        command.pre_exec(move || {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                                return Err(std::io::Error::last_os_error());
                            }
                            // The parent died before prctl: do not run unsupervised.
                            if libc::getppid() as u32 != parent {
                                libc::_exit(1);
                            }
                            Ok(())
                        });
                    }
                    let _ = reply.send(command.spawn());
                }
                // The sender lives in a static: never reached; park so the thread (and
                // with it the children's lifeline) stays.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawn the postgres spawner thread");
        install_atexit();
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send((command, reply_tx))
        .expect("spawner thread alive");
    reply_rx.recv().expect("spawner thread answers")
}

/// Live server pids and data directories to clean up at exit.
static LIVE_PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static EXIT_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register_pid(pid: u32) {
    LIVE_PIDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(pid);
}

fn unregister_pid(pid: u32) {
    LIVE_PIDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|p| *p != pid);
}

fn register_dir_cleanup(dir: &Path) {
    EXIT_DIRS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(dir.to_owned());
}

fn install_atexit() {
    extern "C" fn at_exit() {
        let pids = std::mem::take(&mut *LIVE_PIDS.lock().unwrap_or_else(PoisonError::into_inner));
        for pid in pids {
            let pid = pid as libc::pid_t;
            // SAFETY: plain syscalls on a child pid this process spawned and did not reap.
            // SIGQUIT is PostgreSQL's immediate shutdown (backends included); SIGCONT
            // wakes a frozen server so it can act on it; SIGKILL if it does not exit.
            unsafe {
                libc::kill(pid, libc::SIGQUIT);
                libc::kill(pid, libc::SIGCONT);
                let deadline = Instant::now() + Duration::from_secs(10);
                while libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) == 0 {
                    if Instant::now() > deadline {
                        libc::kill(pid, libc::SIGKILL);
                        libc::waitpid(pid, std::ptr::null_mut(), 0);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        let dirs = std::mem::take(&mut *EXIT_DIRS.lock().unwrap_or_else(PoisonError::into_inner));
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    // SAFETY: registers a handler that only locks, signals, waits and removes files.
    unsafe {
        libc::atexit(at_exit);
    }
}
