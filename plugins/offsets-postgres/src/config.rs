//! The plugin's configuration: the TOML string the operator writes under
//! `[plugins.config.postgres]`.
//!
//! The server is given either as `url` (a `postgres://user:password@host:port/dbname`
//! URL or a libpq-style `key=value` string) or with the discrete keys `host`, `port`,
//! `user`, `password` and `dbname`; not both, except that `password` may accompany a
//! `url` without one (so the URL can be shown in logs). Every error is
//! [`drover_abi::ErrorKind::InvalidConfig`], names the key, and never repeats the
//! password.

use std::{str::FromStr, time::Duration};

use drover_abi::PluginError;
use serde::Deserialize;
use tokio_postgres::config::{Host, SslMode};

/// Kafka's default for `offset.metadata.max.bytes`.
pub const DEFAULT_MAX_METADATA_BYTES: usize = 4096;
/// Default table name.
pub const DEFAULT_TABLE: &str = "drover_offsets";
/// Default number of pooled connections.
pub const DEFAULT_POOL_SIZE: usize = 4;
/// Most pooled connections accepted.
pub const MAX_POOL_SIZE: usize = 64;
/// Default bound on establishing one connection (TCP, authentication, session setup).
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Default server-side `statement_timeout`.
pub const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 10_000;
/// The longest identifier PostgreSQL keeps (`NAMEDATALEN - 1`); longer ones would be
/// truncated silently, so they are refused.
pub const MAX_IDENTIFIER_BYTES: usize = 63;
/// The `application_name` the plugin's sessions report unless the URL sets one.
pub const APPLICATION_NAME: &str = "drover-offsets-postgres";

/// The validated configuration of a PostgreSQL store.
#[derive(Debug, Clone)]
pub struct Config {
    /// How to reach the server (hosts, port, user, password, database), with the
    /// plugin's timeouts and keepalives applied.
    pub connection: tokio_postgres::Config,
    /// The server as shown in messages: `host:port, database `db`, user `u``, never the
    /// password.
    pub target: String,
    /// The schema holding the table; `None` uses the session's `search_path`.
    pub schema: Option<String>,
    /// The table name (unquoted; quoted when used in SQL).
    pub table: String,
    /// How many connections the store keeps at most.
    pub pool_size: usize,
    /// Bound on establishing one connection, including authentication and session setup.
    pub connect_timeout: Duration,
    /// The server-side `statement_timeout` of every session, and the client-side bound on
    /// waiting for an answer (together with `connect_timeout`).
    pub statement_timeout: Duration,
    /// The longest metadata string (in UTF-8 bytes) a commit may carry; a batch with a
    /// longer one is refused as a whole.
    pub max_metadata_bytes: usize,
}

/// The TOML shape; every field optional so that missing keys get our own messages.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    url: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    password: Option<String>,
    dbname: Option<String>,
    schema: Option<String>,
    table: Option<String>,
    pool_size: Option<usize>,
    connect_timeout_ms: Option<u64>,
    statement_timeout_ms: Option<u64>,
    max_metadata_bytes: Option<usize>,
}

fn invalid(message: impl std::fmt::Display) -> PluginError {
    PluginError::invalid_config(format!(
        "offset store `postgres`: invalid config: {message}"
    ))
}

impl Config {
    /// Parses and validates `text`. Errors are [`drover_abi::ErrorKind::InvalidConfig`]:
    /// no server given (neither `url` nor `host`/`user`), both forms given, a URL that
    /// does not parse, no user, `sslmode=require` (this build has no TLS), an unknown key
    /// (named in the message), a value of the wrong type or out of range, an empty or
    /// too long `table`/`schema`.
    pub fn parse(text: &str) -> Result<Config, PluginError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| invalid(e.message()))?;
        let mut connection = connection(&raw)?;

        let pool_size = raw.pool_size.unwrap_or(DEFAULT_POOL_SIZE);
        if !(1..=MAX_POOL_SIZE).contains(&pool_size) {
            return Err(invalid(format!(
                "`pool_size` must be between 1 and {MAX_POOL_SIZE} (got {pool_size})"
            )));
        }
        let connect_timeout = millis(
            "connect_timeout_ms",
            raw.connect_timeout_ms,
            DEFAULT_CONNECT_TIMEOUT_MS,
        )?;
        let statement_timeout = millis(
            "statement_timeout_ms",
            raw.statement_timeout_ms,
            DEFAULT_STATEMENT_TIMEOUT_MS,
        )?;
        let table = identifier("table", raw.table.as_deref().unwrap_or(DEFAULT_TABLE))?;
        let schema = raw
            .schema
            .as_deref()
            .map(|s| identifier("schema", s))
            .transpose()?;

        // Timeouts and keepalives. The client-side deadlines in `pool` bound every wait;
        // these make the kernel notice a dead peer on idle pooled connections too.
        connection.connect_timeout(connect_timeout);
        if connection.get_tcp_user_timeout().is_none() {
            connection.tcp_user_timeout(connect_timeout + statement_timeout);
        }
        if connection.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            // tokio-postgres' default (the kernel's 2 h) finds a dead peer far too late.
            connection.keepalives_idle(Duration::from_secs(30));
            connection.keepalives_interval(Duration::from_secs(10));
            connection.keepalives_retries(3);
        }
        if connection.get_application_name().is_none() {
            connection.application_name(APPLICATION_NAME);
        }

        Ok(Config {
            target: target(&connection),
            connection,
            schema,
            table,
            pool_size,
            connect_timeout,
            statement_timeout,
            max_metadata_bytes: raw.max_metadata_bytes.unwrap_or(DEFAULT_MAX_METADATA_BYTES),
        })
    }

    /// The client-side bound on one call: a new connection may take `connect_timeout`,
    /// then the statements `statement_timeout`.
    pub fn call_timeout(&self) -> Duration {
        self.connect_timeout + self.statement_timeout
    }
}

/// The connection settings from `url` or the discrete keys.
fn connection(raw: &RawConfig) -> Result<tokio_postgres::Config, PluginError> {
    let discrete = [
        ("host", raw.host.is_some()),
        ("port", raw.port.is_some()),
        ("user", raw.user.is_some()),
        ("dbname", raw.dbname.is_some()),
    ];
    let mut connection = match &raw.url {
        Some(url) => {
            if let Some((key, _)) = discrete.iter().find(|(_, given)| *given) {
                return Err(invalid(format!(
                    "give either `url` or the discrete keys (host, port, user, password, \
                     dbname), not both: `{key}` is set next to `url`"
                )));
            }
            let parsed = tokio_postgres::Config::from_str(url).map_err(|e| {
                let why = std::error::Error::source(&e)
                    .map(|s| format!("{e}: {s}"))
                    .unwrap_or_else(|| e.to_string());
                invalid(format!(
                    "`url` is not a PostgreSQL connection URL ({why}); expected \
                     postgres://user:password@host:port/dbname"
                ))
            })?;
            if raw.password.is_some() && parsed.get_password().is_some() {
                return Err(invalid(
                    "the password is given twice, in `url` and as `password`",
                ));
            }
            if parsed.get_connect_timeout().is_some() {
                return Err(invalid(
                    "set `connect_timeout_ms` instead of the URL's `connect_timeout` parameter",
                ));
            }
            parsed
        }
        None => {
            if raw.host.is_none() && raw.user.is_none() {
                return Err(invalid(
                    "no server given: set `url` (e.g. url = \
                     \"postgres://drover:secret@db.example:5432/drover\") or `host`, `user` \
                     (and `port`, `password`, `dbname`)",
                ));
            }
            let mut c = tokio_postgres::Config::new();
            let host = raw.host.as_deref().unwrap_or("localhost");
            if host.is_empty() {
                return Err(invalid("`host` is empty"));
            }
            c.host(host);
            c.port(raw.port.unwrap_or(5432));
            if let Some(user) = &raw.user {
                c.user(user);
            }
            if let Some(dbname) = &raw.dbname {
                c.dbname(dbname);
            }
            c
        }
    };
    if let Some(password) = &raw.password {
        connection.password(password.as_bytes());
    }
    match connection.get_user() {
        Some(user) if !user.is_empty() => {}
        _ => {
            return Err(invalid(
                "no user given: put it in `url` (postgres://USER@host/dbname) or set `user`",
            ))
        }
    }
    if connection.get_hosts().is_empty() && connection.get_hostaddrs().is_empty() {
        connection.host("localhost");
    }
    if connection.get_ssl_mode() == SslMode::Require {
        return Err(invalid(
            "sslmode=require: this build of the plugin has no TLS support; use a TLS-terminating \
             proxy on the broker's host, or sslmode=disable / prefer",
        ));
    }
    Ok(connection)
}

/// A positive number of milliseconds, `default` when absent.
fn millis(key: &str, value: Option<u64>, default: u64) -> Result<Duration, PluginError> {
    match value.unwrap_or(default) {
        0 => Err(invalid(format!("`{key}` must be at least 1"))),
        ms if ms > 24 * 60 * 60 * 1000 => Err(invalid(format!(
            "`{key}` must be at most one day (got {ms})"
        ))),
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// A table or schema name as PostgreSQL would keep it (quoted in SQL, so any characters
/// but NUL work, and the name is case-sensitive).
fn identifier(key: &str, name: &str) -> Result<String, PluginError> {
    if name.is_empty() {
        return Err(invalid(format!("`{key}` is empty")));
    }
    if name.contains('\0') {
        return Err(invalid(format!("`{key}` contains a NUL character")));
    }
    if name.len() > MAX_IDENTIFIER_BYTES {
        return Err(invalid(format!(
            "`{key}` is {} bytes long; PostgreSQL names hold at most {MAX_IDENTIFIER_BYTES}",
            name.len()
        )));
    }
    Ok(name.to_owned())
}

/// `host:port, database `db`, user `u`` for messages.
fn target(c: &tokio_postgres::Config) -> String {
    let mut hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    if hosts.is_empty() {
        hosts = c.get_hostaddrs().iter().map(|a| a.to_string()).collect();
    }
    let ports = c.get_ports();
    let port = |i: usize| -> u16 {
        match ports.len() {
            0 => 5432,
            1 => ports[0],
            _ => ports.get(i).copied().unwrap_or(5432),
        }
    };
    let servers: Vec<String> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{h}:{}", port(i)))
        .collect();
    let user = c.get_user().unwrap_or_default();
    let db = c.get_dbname().unwrap_or(user);
    format!("{}, database `{db}`, user `{user}`", servers.join(","))
}

#[cfg(test)]
mod tests {
    use drover_abi::ErrorKind;

    use super::*;

    fn err(text: &str) -> String {
        let e = Config::parse(text).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}: {e}");
        e.message.to_string()
    }

    #[test]
    fn url_with_defaults() {
        let c =
            Config::parse("url = \"postgres://drover:s3cret@db.example:6543/offsets\"").unwrap();
        assert_eq!(c.connection.get_user(), Some("drover"));
        assert_eq!(c.connection.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(c.connection.get_dbname(), Some("offsets"));
        assert_eq!(c.connection.get_ports(), [6543]);
        assert_eq!(
            c.target,
            "db.example:6543, database `offsets`, user `drover`"
        );
        assert!(!c.target.contains("s3cret"));
        assert_eq!(c.table, DEFAULT_TABLE);
        assert_eq!(c.schema, None);
        assert_eq!(c.pool_size, DEFAULT_POOL_SIZE);
        assert_eq!(c.connect_timeout, Duration::from_millis(5000));
        assert_eq!(c.statement_timeout, Duration::from_millis(10_000));
        assert_eq!(c.call_timeout(), Duration::from_millis(15_000));
        assert_eq!(c.max_metadata_bytes, DEFAULT_MAX_METADATA_BYTES);
        assert_eq!(
            c.connection.get_connect_timeout(),
            Some(&Duration::from_millis(5000))
        );
        assert_eq!(c.connection.get_application_name(), Some(APPLICATION_NAME));
    }

    #[test]
    fn discrete_keys_and_every_option() {
        let c = Config::parse(
            "host = \"127.0.0.1\"\nport = 5433\nuser = \"u\"\npassword = \"p\"\n\
             dbname = \"d\"\nschema = \"Drover\"\ntable = \"my offsets\"\npool_size = 2\n\
             connect_timeout_ms = 250\nstatement_timeout_ms = 750\nmax_metadata_bytes = 9\n",
        )
        .unwrap();
        assert_eq!(c.target, "127.0.0.1:5433, database `d`, user `u`");
        assert_eq!(c.connection.get_password(), Some(&b"p"[..]));
        assert_eq!(c.schema.as_deref(), Some("Drover"));
        assert_eq!(c.table, "my offsets");
        assert_eq!(c.pool_size, 2);
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert_eq!(c.statement_timeout, Duration::from_millis(750));
        assert_eq!(c.max_metadata_bytes, 9);
        // Without a host the default is localhost:5432, and the database the user's.
        let c = Config::parse("user = \"u\"").unwrap();
        assert_eq!(c.target, "localhost:5432, database `u`, user `u`");
    }

    #[test]
    fn password_may_accompany_a_url_without_one() {
        let c = Config::parse("url = \"postgres://u@h/d\"\npassword = \"p\"").unwrap();
        assert_eq!(c.connection.get_password(), Some(&b"p"[..]));
        let e = err("url = \"postgres://u:x@h/d\"\npassword = \"p\"");
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn key_value_connection_strings_work_too() {
        let c = Config::parse("url = \"host=h port=1 user=u dbname=d\"").unwrap();
        assert_eq!(c.target, "h:1, database `d`, user `u`");
    }

    #[test]
    fn missing_or_doubled_server() {
        for text in ["", "table = \"t\"", "password = \"p\""] {
            let e = err(text);
            assert!(e.contains("no server given"), "{text:?}: {e}");
        }
        let e = err("url = \"postgres://u@h/d\"\nhost = \"h\"");
        assert!(e.contains("not both") && e.contains("`host`"), "{e}");
        let e = err("url = \"postgres://h/d\"");
        assert!(e.contains("no user given"), "{e}");
        let e = err("host = \"\"\nuser = \"u\"");
        assert!(e.contains("`host` is empty"), "{e}");
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_the_password() {
        for url in [
            "postgres://u:topsecret@h:notaport/d",
            "mysql://u:topsecret@h/d",
            "postgres://u:topsecret@h/d?sslmode=sometimes",
            "postgres://u:topsecret@h/d?bogus=1",
        ] {
            let e = err(&format!("url = {url:?}"));
            assert!(e.contains("`url`"), "{url}: {e}");
            assert!(!e.contains("topsecret"), "{url}: {e}");
        }
        let e = err("url = \"postgres://u@h/d?sslmode=require\"");
        assert!(e.contains("no TLS support"), "{e}");
        let e = err("url = \"postgres://u@h/d?connect_timeout=3\"");
        assert!(e.contains("connect_timeout_ms"), "{e}");
    }

    #[test]
    fn out_of_range_values() {
        let base = "url = \"postgres://u@h/d\"\n";
        for (extra, needle) in [
            ("pool_size = 0", "`pool_size`"),
            ("pool_size = 65", "`pool_size`"),
            ("connect_timeout_ms = 0", "`connect_timeout_ms`"),
            ("statement_timeout_ms = 0", "`statement_timeout_ms`"),
            ("statement_timeout_ms = 100000000", "`statement_timeout_ms`"),
            ("table = \"\"", "`table` is empty"),
            ("schema = \"\"", "`schema` is empty"),
            ("table = \"a\\u0000b\"", "NUL"),
            (&format!("table = \"{}\"", "t".repeat(64)), "at most 63"),
        ] {
            let e = err(&format!("{base}{extra}"));
            assert!(e.contains(needle), "{extra}: {e}");
        }
        // 63 bytes is fine.
        Config::parse(&format!("{base}table = \"{}\"", "t".repeat(63))).unwrap();
    }

    #[test]
    fn unknown_keys_and_wrong_types() {
        let e = err("url = \"postgres://u@h/d\"\ndatabase = \"x\"");
        assert!(e.contains("database"), "{e}");
        for text in [
            "url = 3",
            "host = \"h\"\nuser = \"u\"\nport = 70000",
            "url = \"postgres://u@h/d\"\npool_size = -1",
            "url = \"postgres://u@h/d\"\nmax_metadata_bytes = \"big\"",
            "not toml [",
        ] {
            err(text);
        }
    }
}
