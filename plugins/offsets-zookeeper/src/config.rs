//! The plugin's configuration: the TOML string the operator writes under
//! `[plugins.config.zookeeper]`.
//!
//! The same table serves both ways of reaching ZooKeeper ([`SessionSource`]): with its
//! own session (standalone broker) `connect` is required and `chroot` is an absolute
//! path on that ensemble; over the broker's session (cluster mode) `connect` may be
//! left out (it is ignored) and `chroot` is a path below the broker's own chroot.

use std::time::Duration;

use drover_abi::PluginError;
use serde::Deserialize;

use crate::layout;

/// Kafka's default for `offset.metadata.max.bytes`.
pub const DEFAULT_MAX_METADATA_BYTES: usize = 4096;
/// The default chroot with the store's own session: every node of the store lives
/// below it.
pub const DEFAULT_CHROOT: &str = "/drover";
/// The default root over the broker's session: the broker's chroot itself, so offsets
/// live at `<broker chroot>/consumers/...`.
pub const DEFAULT_BROKER_ROOT: &str = "/";
/// Kafka's default `zookeeper.session.timeout.ms`.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 18_000;
/// The default bound on one ZooKeeper request (and on connecting).
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// The default bound on the encoded size of one multi-operation: half of ZooKeeper's
/// default `jute.maxbuffer` (1 MiB), which bounds every request a server accepts.
pub const DEFAULT_MAX_MULTI_BYTES: usize = 512 * 1024;
/// The largest `max_multi_bytes` accepted: below ZooKeeper's default `jute.maxbuffer`
/// (1,048,575 bytes) with room for the request headers.
pub const MAX_MULTI_BYTES_LIMIT: usize = 1_000_000;
/// The smallest `max_multi_bytes` accepted.
pub const MIN_MULTI_BYTES: usize = 4096;
/// Worst-case growth of metadata in the JSON node value: a control character is
/// escaped as `\u00XX`, six bytes for one.
pub const METADATA_ESCAPE_FACTOR: usize = 6;
/// Room in one multi for a record's paths and the value's other fields, on top of its
/// escaped metadata (see [`Config::parse`]'s check of `max_metadata_bytes`).
pub const RECORD_OVERHEAD_BYTES: usize = 2048;

/// Which ZooKeeper session the store uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSource {
    /// Its own session, opened from `connect` (the broker is standalone).
    Own,
    /// The broker's session, lent through `HostServices.zookeeper` in cluster mode.
    /// Paths are below the broker's chroot; `connect` and `session_timeout_ms` are
    /// ignored.
    Broker,
}

/// The validated configuration of a ZooKeeper store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Which session the store uses.
    pub session: SessionSource,
    /// The ZooKeeper ensemble, `host:port[,host:port...]`, as given; empty when not
    /// given over the broker's session (where it is ignored).
    pub connect: String,
    /// The node below which the store keeps `consumers/...`: absolute, no trailing `/`
    /// (except `/` itself). Over the broker's session, relative to the broker's chroot.
    pub chroot: String,
    /// The session timeout asked of the server (which clamps it to its own bounds).
    pub session_timeout: Duration,
    /// The longest wait for one ZooKeeper request, and for (re)connecting. A call made
    /// while ZooKeeper is down fails with `Unavailable` after at most about this long.
    pub request_timeout: Duration,
    /// The longest metadata string (in UTF-8 bytes) a commit may carry; a batch with a
    /// longer one is refused as a whole.
    pub max_metadata_bytes: usize,
    /// The largest encoded size of one multi-operation; larger batches are split.
    pub max_multi_bytes: usize,
    /// With its own session: a file holding `user:password` (one line, mode 0600 or
    /// stricter): the session authenticates with the `digest` scheme as that user and
    /// every node the store creates gets "all rights for that identity, read for
    /// anyone". Read when the store opens (and at each new session); never logged.
    /// Over the broker's session it is ignored (`zookeeper.auth_digest_file` applies).
    pub auth_digest_file: Option<std::path::PathBuf>,
}

/// The TOML shape; every field optional so that a missing `connect` gets our own message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    connect: Option<String>,
    chroot: Option<String>,
    session_timeout_ms: Option<u64>,
    request_timeout_ms: Option<u64>,
    max_metadata_bytes: Option<usize>,
    max_multi_bytes: Option<usize>,
    auth_digest_file: Option<std::path::PathBuf>,
}

fn invalid(message: impl std::fmt::Display) -> PluginError {
    PluginError::invalid_config(format!(
        "offset store `zookeeper`: invalid config: {message}"
    ))
}

impl Config {
    /// Parses and validates `text` for a store with its own session
    /// ([`SessionSource::Own`]). Errors are [`drover_abi::ErrorKind::InvalidConfig`]: a
    /// missing or malformed `connect`, a `chroot` that is not an absolute ZooKeeper
    /// path, an unknown key (named in the message), a value of the wrong type or out of
    /// range (the message gives the range).
    pub fn parse(text: &str) -> Result<Config, PluginError> {
        Config::parse_for(text, SessionSource::Own)
    }

    /// Parses and validates `text` for a store using `session`. Over the broker's
    /// session `connect` is optional (checked when given, then ignored) and `chroot`
    /// defaults to [`DEFAULT_BROKER_ROOT`]. Errors as [`Config::parse`].
    pub fn parse_for(text: &str, session: SessionSource) -> Result<Config, PluginError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| invalid(e.message()))?;
        let connect = match (raw.connect, session) {
            (Some(c), _) if !c.trim().is_empty() => c.trim().to_owned(),
            (_, SessionSource::Broker) => String::new(),
            (_, SessionSource::Own) => {
                return Err(PluginError::invalid_config(
                    "offset store `zookeeper`: `connect` is required (the ZooKeeper \
                     ensemble, e.g. connect = \"127.0.0.1:2181\" or \
                     \"zk1:2181,zk2:2181,zk3:2181\"); only in cluster mode, where the \
                     broker lends the store its own ZooKeeper session, may it be left out",
                ))
            }
        };
        if !connect.is_empty() {
            validate_connect(&connect)?;
        }
        let default_chroot = match session {
            SessionSource::Own => DEFAULT_CHROOT,
            SessionSource::Broker => DEFAULT_BROKER_ROOT,
        };
        let chroot = normalize_chroot(raw.chroot.as_deref().unwrap_or(default_chroot))?;
        let session_timeout_ms = raw.session_timeout_ms.unwrap_or(DEFAULT_SESSION_TIMEOUT_MS);
        if !(1_000..=3_600_000).contains(&session_timeout_ms) {
            return Err(invalid(format_args!(
                "`session_timeout_ms` = {session_timeout_ms} is out of range 1000..=3600000"
            )));
        }
        let request_timeout_ms = raw.request_timeout_ms.unwrap_or(DEFAULT_REQUEST_TIMEOUT_MS);
        if !(100..=3_600_000).contains(&request_timeout_ms) {
            return Err(invalid(format_args!(
                "`request_timeout_ms` = {request_timeout_ms} is out of range 100..=3600000"
            )));
        }
        let max_multi_bytes = raw.max_multi_bytes.unwrap_or(DEFAULT_MAX_MULTI_BYTES);
        if !(MIN_MULTI_BYTES..=MAX_MULTI_BYTES_LIMIT).contains(&max_multi_bytes) {
            return Err(invalid(format_args!(
                "`max_multi_bytes` = {max_multi_bytes} is out of range \
                 {MIN_MULTI_BYTES}..={MAX_MULTI_BYTES_LIMIT} (a ZooKeeper server refuses \
                 requests larger than its jute.maxbuffer, 1 MiB by default)"
            )));
        }
        let max_metadata_bytes = raw.max_metadata_bytes.unwrap_or(DEFAULT_MAX_METADATA_BYTES);
        let largest = max_metadata_bytes
            .saturating_mul(METADATA_ESCAPE_FACTOR)
            .saturating_add(RECORD_OVERHEAD_BYTES);
        if largest > max_multi_bytes {
            let most = (max_multi_bytes - RECORD_OVERHEAD_BYTES) / METADATA_ESCAPE_FACTOR;
            return Err(invalid(format_args!(
                "`max_metadata_bytes` = {max_metadata_bytes} is too large: one record must \
                 fit in one multi-operation of `max_multi_bytes` = {max_multi_bytes} \
                 (metadata may grow {METADATA_ESCAPE_FACTOR}x when escaped); at most {most}"
            )));
        }
        Ok(Config {
            session,
            connect,
            chroot,
            session_timeout: Duration::from_millis(session_timeout_ms),
            request_timeout: Duration::from_millis(request_timeout_ms),
            max_metadata_bytes,
            max_multi_bytes,
            auth_digest_file: match session {
                SessionSource::Own => raw.auth_digest_file,
                SessionSource::Broker => None,
            },
        })
    }
}

/// Reads `user:password` from `path` (one line, the final newline dropped; a file group
/// or others may read is refused). Errors name the file, never its contents.
pub fn read_digest_file(path: &std::path::Path) -> Result<Vec<u8>, PluginError> {
    use std::os::unix::fs::PermissionsExt;
    let what = |why: &dyn std::fmt::Display| {
        invalid(format_args!("`auth_digest_file` {}: {why}", path.display()))
    };
    let meta = std::fs::metadata(path).map_err(|e| what(&e))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(what(&"group or others may read it; chmod 600 it"));
    }
    let mut line = std::fs::read(path).map_err(|e| what(&e))?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let colon = line.iter().position(|&b| b == b':');
    match colon {
        Some(c) if c > 0 && c + 1 < line.len() && !line.iter().any(|b| b.is_ascii_control()) => {
            Ok(line)
        }
        _ => Err(what(
            &"expected one line `user:password`, both non-empty, no control characters",
        )),
    }
}

/// Checks `host:port[,host:port...]`. A `/chroot` suffix (allowed by ZooKeeper's own
/// clients) is refused with a hint to use the `chroot` key.
fn validate_connect(connect: &str) -> Result<(), PluginError> {
    if connect.contains('/') {
        return Err(invalid(format_args!(
            "`connect` = {connect:?} contains a path; hint: give only host:port pairs and \
             put the path in `chroot` (e.g. chroot = \"/drover\")"
        )));
    }
    for server in connect.split(',') {
        let server = server.trim();
        let port = server.rsplit_once(':').and_then(|(host, port)| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            (!host.is_empty() && !host.contains(char::is_whitespace))
                .then(|| port.parse::<u16>().ok().filter(|p| *p != 0))
                .flatten()
        });
        if port.is_none() {
            return Err(invalid(format_args!(
                "`connect` = {connect:?}: {server:?} is not host:port (e.g. \"127.0.0.1:2181\")"
            )));
        }
    }
    Ok(())
}

/// Validates an absolute ZooKeeper path and drops a trailing `/` (keeping `/` itself).
fn normalize_chroot(chroot: &str) -> Result<String, PluginError> {
    let bad = |why: &str| {
        invalid(format_args!(
            "`chroot` = {chroot:?} {why} (an absolute ZooKeeper path, e.g. \"/drover\")"
        ))
    };
    if !chroot.starts_with('/') {
        return Err(bad("does not start with '/'"));
    }
    let trimmed = chroot.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("/".to_owned());
    }
    for component in trimmed[1..].split('/') {
        if component.is_empty() {
            return Err(bad("has an empty path component"));
        }
        if component == "." || component == ".." {
            return Err(bad("has a relative component (. or ..)"));
        }
        if component.chars().any(layout::is_forbidden_in_path) {
            return Err(bad("has characters ZooKeeper does not allow in paths"));
        }
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use drover_abi::ErrorKind;

    use super::*;

    #[test]
    fn full_config() {
        let c = Config::parse(
            "connect = \"zk1:2181, zk2:2182\"\nchroot = \"/a/b/\"\nsession_timeout_ms = 6000\n\
             request_timeout_ms = 500\nmax_metadata_bytes = 10\nmax_multi_bytes = 65536\n",
        )
        .unwrap();
        assert_eq!(c.connect, "zk1:2181, zk2:2182");
        assert_eq!(c.chroot, "/a/b");
        assert_eq!(c.session_timeout, Duration::from_millis(6000));
        assert_eq!(c.request_timeout, Duration::from_millis(500));
        assert_eq!(c.max_metadata_bytes, 10);
        assert_eq!(c.max_multi_bytes, 65536);
    }

    #[test]
    fn auth_digest_file_only_with_its_own_session_and_never_quoted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zk.digest");
        let text = format!(
            "connect = '127.0.0.1:2181'\nauth_digest_file = {:?}\n",
            path
        );
        let own = Config::parse(&text).unwrap();
        assert_eq!(own.auth_digest_file.as_deref(), Some(path.as_path()));
        let lent = Config::parse_for(&text, SessionSource::Broker).unwrap();
        assert_eq!(lent.auth_digest_file, None);
        // (contents, mode) -> what reading it gives.
        let read = |contents: &str, mode: u32| {
            std::fs::write(&path, contents).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            read_digest_file(&path).map_err(|e| e.to_string())
        };
        assert_eq!(
            read("drover:pa55word\n", 0o600).unwrap(),
            b"drover:pa55word"
        );
        let refusals = [
            read("drover:pa55word", 0o640).unwrap_err(),
            read("droverpa55word", 0o600).unwrap_err(),
            read("drover:", 0o600).unwrap_err(),
            read("drover:pa55\nword", 0o600).unwrap_err(),
        ];
        assert!(refusals[0].contains("chmod 600"), "{}", refusals[0]);
        assert!(refusals[1..].iter().all(|e| e.contains("`user:password`")));
        assert!(!refusals.iter().any(|e| e.contains("pa55")), "{refusals:?}");
    }

    #[test]
    fn defaults() {
        let c = Config::parse("connect = '127.0.0.1:2181'").unwrap();
        assert_eq!(c.chroot, DEFAULT_CHROOT);
        assert_eq!(c.max_metadata_bytes, DEFAULT_MAX_METADATA_BYTES);
        assert_eq!(c.max_multi_bytes, DEFAULT_MAX_MULTI_BYTES);
        assert_eq!(
            c.request_timeout,
            Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS)
        );
        assert_eq!(
            c.session_timeout,
            Duration::from_millis(DEFAULT_SESSION_TIMEOUT_MS)
        );
        let c = Config::parse("connect = '[::1]:2181'\nchroot = '/'").unwrap();
        assert_eq!(c.chroot, "/");
    }

    #[test]
    fn over_the_broker_session() {
        let c = Config::parse_for("", SessionSource::Broker).unwrap();
        assert_eq!(c.session, SessionSource::Broker);
        assert_eq!(c.connect, "");
        assert_eq!(c.chroot, DEFAULT_BROKER_ROOT);
        let c = Config::parse_for(
            "connect = '10.0.0.1:2181'\nchroot = '/offsets/'\nrequest_timeout_ms = 500",
            SessionSource::Broker,
        )
        .unwrap();
        assert_eq!(c.connect, "10.0.0.1:2181");
        assert_eq!(c.chroot, "/offsets");
        // A malformed `connect` or an unknown key is still refused.
        for text in ["connect = 'zk'", "cache_mb = 3", "chroot = 'x'"] {
            let e = Config::parse_for(text, SessionSource::Broker).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}");
        }
        assert_eq!(
            Config::parse("connect = 'zk:1'").unwrap().session,
            SessionSource::Own
        );
    }

    #[test]
    fn missing_connect_is_rejected() {
        for text in ["", "  \n", "connect = \"\"", "chroot = '/x'"] {
            let e = Config::parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}");
            assert!(e.message.contains("`connect` is required"), "{text:?}: {e}");
        }
    }

    #[test]
    fn bad_values_are_explained() {
        for (text, needle) in [
            ("connect = 'zk:2181/drover'", "`chroot`"),
            ("connect = 'zk'", "host:port"),
            ("connect = 'zk:0'", "host:port"),
            ("connect = 'zk:2181,'", "host:port"),
            ("connect = ':2181'", "host:port"),
            ("connect = 'zk:2181'\nchroot = 'drover'", "start with '/'"),
            (
                "connect = 'zk:2181'\nchroot = '/a//b'",
                "empty path component",
            ),
            ("connect = 'zk:2181'\nchroot = '/a/../b'", "relative"),
            ("connect = 'zk:2181'\nchroot = \"/a\\u0001\"", "characters"),
            (
                "connect = 'zk:2181'\nsession_timeout_ms = 10",
                "1000..=3600000",
            ),
            (
                "connect = 'zk:2181'\nrequest_timeout_ms = 0",
                "100..=3600000",
            ),
            (
                "connect = 'zk:2181'\nmax_multi_bytes = 2000000",
                "jute.maxbuffer",
            ),
            (
                "connect = 'zk:2181'\nmax_metadata_bytes = 1000000",
                "at most",
            ),
            ("connect = 'zk:2181'\ncache_mb = 3", "cache_mb"),
            ("connect = 3", "invalid config"),
            (
                "connect = 'zk:2181'\nmax_metadata_bytes = -1",
                "invalid config",
            ),
            ("not toml [", "invalid config"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}");
            assert!(e.message.contains(needle), "{text:?}: {e}");
        }
    }
}
