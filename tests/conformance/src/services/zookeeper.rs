//! A real ZooKeeper server for tests: the Debian `zookeeper` package's jar run as a
//! standalone server on a free loopback port, with a temporary data directory.
//!
//! - [`ZkServer::shared`]: one server per test process, started on first use. Tests
//!   share it and keep apart by using a unique chroot each ([`unique_chroot`]).
//! - [`ZkServer::start`]: a dedicated server that a test may [`ZkServer::stop`] and
//!   [`ZkServer::restart`] (same port, same data), killed when dropped.
//!
//! No `java` process outlives the test process: every server is spawned with
//! `PR_SET_PDEATHSIG(SIGKILL)` from a spawner thread that lives as long as the process
//! (the signal follows the thread that forked), so the kernel kills the servers even
//! when the test process is killed; on a normal exit a libc `atexit` handler kills them
//! and removes their data directories.
//!
//! When ZooKeeper is not installed the first use panics with a message saying to run
//! `scripts/install-test-deps.sh`.
//!
//! This file depends only on `std`, `libc` and `tempfile`: the `zookeeper` plugin's own
//! tests include it by path (`#[path]`), so it must stay self-contained.

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, TcpListener, TcpStream},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Mutex, OnceLock, PoisonError,
    },
    time::{Duration, Instant},
};

/// The server jar of the Debian package.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The logging backend the server needs (`libslf4j-java`, a dependency of the package).
pub const SLF4J_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// How long a server may take to answer `ruok` (a cold JVM takes about 1.5 s).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The server's tick: sessions may last 2 to 20 ticks (1 s to 10 s).
pub const TICK_MS: u64 = 500;

/// A standalone ZooKeeper server run by the tests.
pub struct ZkServer {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    /// Extra `java` options, after the defaults (so they override them).
    java_options: Vec<String>,
    /// Owns `dir` for a dedicated server (the shared one's is removed at exit).
    _temp: Option<tempfile::TempDir>,
}

impl ZkServer {
    /// The server shared by every test of this process, started on first use.
    pub fn shared() -> &'static ZkServer {
        static SHARED: OnceLock<ZkServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            let temp = new_temp_dir();
            let dir = temp.keep();
            register_dir_cleanup(&dir);
            ZkServer::launch(dir, None, Vec::new())
        })
    }

    /// A dedicated server, for tests that stop and restart it. Killed on drop.
    pub fn start() -> ZkServer {
        ZkServer::start_with_java_options(&[])
    }

    /// A dedicated server whose JVM also gets `options`, after the test defaults
    /// (`-Xmx256m`, `-XX:TieredStopAtLevel=1`, ...), so they override them: e.g.
    /// `["-Xmx2g", "-XX:TieredStopAtLevel=4"]` for a benchmark holding a million nodes.
    /// Killed on drop.
    pub fn start_with_java_options(options: &[&str]) -> ZkServer {
        let temp = new_temp_dir();
        let dir = temp.path().to_owned();
        let options = options.iter().map(|o| o.to_string()).collect();
        ZkServer::launch(dir, Some(temp), options)
    }

    fn launch(
        dir: PathBuf,
        temp: Option<tempfile::TempDir>,
        java_options: Vec<String>,
    ) -> ZkServer {
        check_installed();
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match spawn_server(&dir, port, &java_options) {
                Ok(child) => {
                    return ZkServer {
                        port,
                        dir,
                        child: Mutex::new(Some(child)),
                        java_options,
                        _temp: temp,
                    }
                }
                // Most likely the port was taken between choosing and binding it.
                Err(e) => last_error = e,
            }
        }
        panic!("cannot start ZooKeeper: {last_error}");
    }

    /// `127.0.0.1:<port>`: the `connect` string of the server.
    pub fn connect(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The config of a fresh `zookeeper` offset store on this server: its `connect`
    /// string and a chroot of its own ([`unique_chroot`]).
    pub fn store_config(&self) -> String {
        format!(
            "connect = {:?}\nchroot = {:?}\n",
            self.connect(),
            unique_chroot("drover-test")
        )
    }

    /// The server's client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (SIGKILL: what it wrote to its transaction log stays) and waits
    /// for it to exit. A no-op when it is stopped.
    pub fn stop(&self) {
        let child = self.slot().take();
        if let Some(mut child) = child {
            unregister_pid(child.id());
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the stopped server again, on the same port with the same data, and waits
    /// until it answers. Panics if it does not come up.
    pub fn restart(&self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match spawn_server(&self.dir, self.port, &self.java_options) {
                Ok(child) => {
                    *self.slot() = Some(child);
                    return;
                }
                // The old listener's port can take a moment to be free again.
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restarting ZooKeeper on port {}: {e}; retrying", self.port);
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("cannot restart ZooKeeper: {e}"),
            }
        }
    }

    /// Whether the server answers `ruok` with `imok`.
    pub fn is_ok(&self) -> bool {
        ruok(self.port)
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The data directory (config, `data/`, `zookeeper.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes the config of a server on `port` with its data in `dir`, spawns it (with
/// `java_options` after the default JVM options) and waits for `imok`. On failure the
/// child is killed and the error carries the end of its log.
fn spawn_server(dir: &Path, port: u16, java_options: &[String]) -> Result<Child, String> {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("mkdir {}: {e}", data.display()))?;
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime={TICK_MS}\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr,stat,mntr,conf\n\
             maxClientCnxns=0\n",
            data.display(),
            port
        ),
    )
    .map_err(|e| format!("write {}: {e}", cfg.display()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("zookeeper.log"))
        .map_err(|e| format!("open log: {e}"))?;
    let log2 = log.try_clone().map_err(|e| format!("dup log: {e}"))?;
    let mut command = Command::new("java");
    command
        .args([
            "-Xms32m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        ])
        .args(java_options)
        .args([
            "-cp",
            &format!("{ZOOKEEPER_JAR}:{SLF4J_JAR}"),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        ])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    let mut child = spawn_tied_to_process(command).map_err(|e| {
        format!("cannot run java (is ZooKeeper installed? run scripts/install-test-deps.sh): {e}")
    })?;
    register_pid(child.id());
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            unregister_pid(child.id());
            return Err(format!(
                "the server exited ({status}) on port {}; its log ends with:\n{}",
                port,
                log_tail(dir)
            ));
        }
        // `conf` confirms the answer comes from this server, not from another test
        // process's server that holds the port.
        if ruok(port) && four_letter_word(port, "conf").contains(&data.display().to_string()) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            unregister_pid(child.id());
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "no `imok` from port {} within {STARTUP_TIMEOUT:?}; log ends with:\n{}",
                port,
                log_tail(dir)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("zookeeper.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A chroot no other store instance of this test run uses: `/<prefix>-<pid>-<n>`.
pub fn unique_chroot(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "/{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn check_installed() {
    for jar in [ZOOKEEPER_JAR, SLF4J_JAR] {
        if !Path::new(jar).is_file() {
            panic!(
                "ZooKeeper is not installed ({jar} is missing); run scripts/install-test-deps.sh \
                 (it installs the Debian package `zookeeper`)"
            );
        }
    }
}

fn new_temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("drover-zk-")
        .tempdir()
        .expect("temp dir for ZooKeeper")
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("bind a free loopback port")
        .port()
}

/// Whether the server on `port` answers the `ruok` four-letter word with `imok`.
fn ruok(port: u16) -> bool {
    four_letter_word(port, "ruok") == "imok"
}

/// The server's answer to a four-letter word (empty when it does not answer).
fn four_letter_word(port: u16, word: &str) -> String {
    let addr = (Ipv4Addr::LOCALHOST, port).into();
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1000)));
    let mut answer = String::new();
    if stream.write_all(word.as_bytes()).is_err() || stream.read_to_string(&mut answer).is_err() {
        return String::new();
    }
    answer
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` from the spawner thread with `PR_SET_PDEATHSIG(SIGKILL)`: the
/// child is killed when that thread, which lives as long as the process, dies.
fn spawn_tied_to_process(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("zookeeper-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let parent = std::process::id();
                    // SAFETY: the closure runs in the forked child before exec and only
                    // calls async-signal-safe functions (prctl, getppid, _exit).
                    unsafe {
                        command.pre_exec(move || {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
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
            .expect("spawn the zookeeper spawner thread");
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
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
        let dirs = std::mem::take(&mut *EXIT_DIRS.lock().unwrap_or_else(PoisonError::into_inner));
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    // SAFETY: registers a handler that only locks, signals and removes files.
    unsafe {
        libc::atexit(at_exit);
    }
}
