//! A `drover serve` child process for tests that need the real binary (raw Kafka frames
//! against it, `kill -9` and a restart on the same data directory): started with a
//! plugin directory and listeners on free loopback ports, waited for until it prints its
//! ready line, and killed with SIGKILL when dropped.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::PluginDir;

/// A running `drover serve`, killed (SIGKILL) on drop.
pub struct Served {
    child: Child,
    /// The Kafka listener.
    pub kafka: SocketAddr,
    /// The admin HTTP API.
    pub admin: SocketAddr,
    _log: std::thread::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `binary` (`env!("CARGO_BIN_EXE_drover")` in the host's tests) with data in
/// `data`, the plugins of `dir`, and `tail` appended to its config (tables after
/// `[plugins]`, e.g. `[coordinator]`); its log lines are echoed prefixed `[drover]`.
pub fn serve(binary: &Path, dir: &PluginDir, data: &Path, tail: &str) -> Served {
    let config = dir.scratch("drover.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\n[plugins]\ndir = {plugins:?}\ncache_dir = {cache:?}\n{tail}",
            plugins = dir.path(),
            cache = dir.cache_dir(),
        ),
    )
    .unwrap();
    let mut child = Command::new(binary)
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start drover");
    let stderr = child.stderr.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let log = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[drover] {line}");
            if line.contains("drover ready") {
                let _ = ready_tx.send(line);
            }
        }
    });
    let line = ready_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("drover did not print its ready line");
    let field = |name: &str| -> SocketAddr {
        let start = line.find(&format!("{name}=")).expect(name) + name.len() + 1;
        let rest = &line[start..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest[..end].trim_matches('"').parse().expect(name)
    };
    Served {
        kafka: field("listen"),
        admin: field("admin"),
        child,
        _log: log,
    }
}
