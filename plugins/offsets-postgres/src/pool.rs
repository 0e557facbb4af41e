//! Connections to PostgreSQL: a small pool, the plugin's own tokio runtime that drives
//! them, and the deadlines and retries around every call.
//!
//! **Runtime.** The host calls the plugin from its own (non-tokio, or another tokio
//! copy's) threads and knows nothing of tokio. The store owns a tokio runtime with one
//! worker thread (`drover-postgres`) on which every connection's I/O task runs; a
//! calling thread runs its statements with `Runtime::block_on`, so several host threads
//! work at once on different connections. The runtime and its thread are the plugin's
//! and go away with the store.
//!
//! **Deadlines.** tokio-postgres is used directly rather than through the synchronous
//! `postgres` crate because every wait needs a client-side bound: `postgres`'
//! `connect_timeout` covers only the TCP connect (a server that accepts but never
//! answers hangs the startup handshake) and its queries have no timeout at all. Here a
//! call gets `connect_timeout + statement_timeout` in all: waiting for a free
//! connection, opening one (at most `connect_timeout`, handshake and session setup
//! included) and the statements. A connection that misses the deadline is dropped (its
//! I/O task aborted) and the call fails with `Unavailable`. The server's own
//! `statement_timeout` (set in every session) usually fires first, with its clearer
//! message.
//!
//! **Reconnection.** A connection that failed with a connection-level error (closed,
//! I/O error, server shutting down, deadline) is discarded with every idle one (after a
//! server restart they are all dead); the next call opens new ones. A call whose
//! *reused* connection turned out dead is retried once on a new connection, so the
//! first call after a server restart succeeds. A deadlock or serialization failure is
//! retried too (every statement the store runs is safe to repeat). At most
//! [`MAX_ATTEMPTS`] attempts, all inside the call's deadline.

use std::{
    sync::{Condvar, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use drover_abi::PluginError;
use futures_util::future::try_join_all;
use tokio::{runtime::Runtime, task::JoinHandle};
use tokio_postgres::{error::SqlState, types::Type, Client, NoTls, Statement};

use crate::{
    config::Config,
    errors::{from_pg, PgFailure, Phase, Retry},
    layout::{self, Sql},
};

/// Most attempts of one call (retries after a dead reused connection or a deadlock).
pub const MAX_ATTEMPTS: u32 = 3;

/// The oldest server accepted: `ON CONFLICT`, `to_regclass(text)` and all the SQL here
/// work from 9.6 on; 10 is the oldest release this was checked against.
const MIN_SERVER_VERSION: i32 = 100_000;

/// How long `close` waits for connections to say goodbye to the server.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The prepared statements of one connection ([`Sql`]'s, in the same order).
pub struct Statements {
    /// [`Sql::upsert`].
    pub upsert: Statement,
    /// [`Sql::fetch`].
    pub fetch: Statement,
    /// [`Sql::fetch_group`].
    pub fetch_group: Statement,
    /// [`Sql::list_groups`].
    pub list_groups: Statement,
    /// [`Sql::delete_group`].
    pub delete_group: Statement,
    /// [`Sql::scan_first`].
    pub scan_first: Statement,
    /// [`Sql::scan_after_key`].
    pub scan_after_key: Statement,
    /// [`Sql::scan_after_topic`].
    pub scan_after_topic: Statement,
    /// [`Sql::scan_after_group`].
    pub scan_after_group: Statement,
}

impl Statements {
    async fn prepare(client: &Client, sql: &Sql) -> Result<Statements, tokio_postgres::Error> {
        let prepared = try_join_all(sql.all().map(|s| client.prepare(s))).await?;
        let [upsert, fetch, fetch_group, list_groups, delete_group, scan_first, scan_after_key, scan_after_topic, scan_after_group] =
            <[Statement; 9]>::try_from(prepared).expect("one statement per SQL text");
        Ok(Statements {
            upsert,
            fetch,
            fetch_group,
            list_groups,
            delete_group,
            scan_first,
            scan_after_key,
            scan_after_topic,
            scan_after_group,
        })
    }
}

/// One session: the client, its statements, and the task driving its socket.
pub struct Conn {
    /// The client half; statements run through it.
    pub client: Client,
    /// The session's prepared statements.
    pub stmts: Statements,
    /// The task that drives the connection; aborted when the connection is dropped.
    task: Option<JoinHandle<()>>,
    /// Whether it served an earlier call (so a failure may mean it went stale).
    reused: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Runs a connection's I/O until the session ends.
async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>, target: String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(e) = connection.await {
        tracing::warn!(
            "{}",
            from_pg(Phase::Call, "connection lost", &target, &e).message
        );
    }
}

/// Opens a session: connect, authenticate, spawn its I/O task, apply the session
/// settings. The task is aborted if anything after the spawn fails.
async fn session(
    rt: &Runtime,
    config: &Config,
) -> Result<(Client, JoinHandle<()>), tokio_postgres::Error> {
    let (client, connection) = config.connection.connect(NoTls).await?;
    let task = rt.spawn(drive(connection, config.target.clone()));
    let abort = AbortOnDrop(Some(task));
    // `synchronous_commit = off` would acknowledge commits a server crash can lose;
    // `local`, `remote_write`, `on` and `remote_apply` are all durable on this server.
    client
        .batch_execute(&format!(
            "SET statement_timeout = {}; \
             SELECT set_config('synchronous_commit', 'on', false) \
             WHERE current_setting('synchronous_commit') = 'off'",
            config.statement_timeout.as_millis()
        ))
        .await?;
    Ok((client, abort.defuse()))
}

/// Aborts a task unless defused.
struct AbortOnDrop(Option<JoinHandle<()>>);

impl AbortOnDrop {
    fn defuse(mut self) -> JoinHandle<()> {
        self.0.take().expect("defused once")
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// The pool: idle connections, how many exist, and the runtime that drives them.
pub struct Pool {
    rt: Option<Runtime>,
    config: Config,
    sql: Sql,
    state: Mutex<PoolState>,
    freed: Condvar,
}

#[derive(Default)]
struct PoolState {
    /// Connections not in use, most recently used last.
    idle: Vec<Conn>,
    /// Connections in existence (idle, in use, or being opened).
    open: usize,
}

impl Pool {
    /// Builds the runtime, opens the first connection, checks the server, creates the
    /// schema and table when missing, checks an existing table's layout and prepares
    /// the statements. Errors: `InvalidConfig` for what only the operator can fix
    /// (authentication, unknown database, permission denied, a table of another layout,
    /// a non-UTF-8 database, a server older than PostgreSQL 10), `Unavailable` when the
    /// server cannot be reached or does not answer in time.
    pub fn open(config: Config) -> Result<Pool, PluginError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .thread_name("drover-postgres")
            .enable_all()
            .build()
            .map_err(|e| {
                PluginError::internal(format!(
                    "offset store `postgres`: cannot start its I/O thread: {e}"
                ))
            })?;
        let table = layout::qualified(config.schema.as_deref(), &config.table);
        let sql = Sql::new(&table);
        let connect_timeout = config.connect_timeout;
        let (client, task) = rt
            .block_on(async { tokio::time::timeout(connect_timeout, session(&rt, &config)).await })
            .map_err(|_| PgFailure::timed_out(connect_timeout))
            .and_then(|r| r.map_err(PgFailure::from))
            .map_err(|f| f.report(Phase::Open, "cannot connect", &config.target))?;
        let task = AbortOnDrop(Some(task));
        let setup_timeout = config.call_timeout();
        let stmts = rt
            .block_on(async {
                tokio::time::timeout(setup_timeout, setup(&client, &config, &table, &sql)).await
            })
            .map_err(|_| {
                PgFailure::timed_out(setup_timeout).report(
                    Phase::Open,
                    "set up the offsets table",
                    &config.target,
                )
            })??;
        let conn = Conn {
            client,
            stmts,
            task: Some(task.defuse()),
            reused: false,
        };
        Ok(Pool {
            rt: Some(rt),
            config,
            sql,
            state: Mutex::new(PoolState {
                idle: vec![conn],
                open: 1,
            }),
            freed: Condvar::new(),
        })
    }

    /// Runs `op` on a pooled connection within the call's deadline, retrying as the
    /// module docs say; `context` names the operation in errors.
    pub fn run<T>(
        &self,
        context: &str,
        mut op: impl AsyncFnMut(&mut Conn) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, PluginError> {
        let started = Instant::now();
        let deadline = started + self.config.call_timeout();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut conn = self.checkout(deadline, context)?;
            let reused = conn.reused;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let outcome = self
                .rt()
                .block_on(async { tokio::time::timeout(remaining, op(&mut conn)).await });
            let failure = match outcome {
                Ok(Ok(value)) => {
                    self.checkin(conn);
                    return Ok(value);
                }
                Ok(Err(e)) => PgFailure::from(e),
                Err(_) => PgFailure::timed_out(started.elapsed()),
            };
            let retry = failure.retry();
            if failure.breaks_connection() {
                self.discard(conn);
                self.discard_idle();
            } else {
                self.checkin(conn);
            }
            let again = attempt < MAX_ATTEMPTS
                && Instant::now() < deadline
                && match retry {
                    // A reused connection may have died while idle (a server restart);
                    // a deadline has used up the call's time already.
                    Retry::Reconnect => reused && failure.error.is_some(),
                    Retry::Transaction => true,
                    Retry::No => false,
                };
            let error = failure.report(Phase::Call, context, &self.config.target);
            if !again {
                return Err(error);
            }
            tracing::debug!("{}; retrying (attempt {})", error.message, attempt + 1);
        }
    }

    /// An idle connection, a new one if fewer than `pool_size` exist, or the first one
    /// freed before `deadline`.
    fn checkout(&self, deadline: Instant, context: &str) -> Result<Conn, PluginError> {
        let mut state = self.lock();
        loop {
            while let Some(conn) = state.idle.pop() {
                if conn.client.is_closed() {
                    state.open -= 1;
                    continue;
                }
                return Ok(conn);
            }
            if state.open < self.config.pool_size {
                state.open += 1;
                drop(state);
                return self.connect(deadline).map_err(|f| {
                    let mut state = self.lock();
                    state.open -= 1;
                    self.freed.notify_one();
                    f.report(Phase::Call, context, &self.config.target)
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(PluginError::unavailable(format!(
                    "offset store `postgres`: {context}: all {} connections to {} stayed busy \
                     for {} ms",
                    self.config.pool_size,
                    self.config.target,
                    self.config.call_timeout().as_millis()
                )));
            }
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Opens a new pooled connection, within `connect_timeout` and `deadline`.
    fn connect(&self, deadline: Instant) -> Result<Conn, PgFailure> {
        let limit = self
            .config
            .connect_timeout
            .min(deadline.saturating_duration_since(Instant::now()));
        let rt = self.rt();
        let connect = async {
            let (client, task) = session(rt, &self.config).await?;
            let task = AbortOnDrop(Some(task));
            let stmts = Statements::prepare(&client, &self.sql).await?;
            Ok::<_, tokio_postgres::Error>(Conn {
                client,
                stmts,
                task: Some(task.defuse()),
                reused: false,
            })
        };
        // The timer must be created inside the runtime (`block_on`'s context).
        rt.block_on(async { tokio::time::timeout(limit, connect).await })
            .map_err(|_| PgFailure::timed_out(limit))?
            .map_err(PgFailure::from)
    }

    /// Returns a healthy connection to the pool.
    fn checkin(&self, mut conn: Conn) {
        conn.reused = true;
        self.lock().idle.push(conn);
        self.freed.notify_one();
    }

    /// Drops a broken connection.
    fn discard(&self, conn: Conn) {
        drop(conn);
        self.lock().open -= 1;
        self.freed.notify_one();
    }

    /// Drops every idle connection (after one broke, the others likely did too).
    fn discard_idle(&self) {
        let idle = {
            let mut state = self.lock();
            let idle = std::mem::take(&mut state.idle);
            state.open -= idle.len();
            idle
        };
        drop(idle);
        self.freed.notify_all();
    }

    /// Ends every session politely (a `Terminate` message, within a short grace time),
    /// then stops the runtime. Only called with no call in flight.
    pub fn shutdown(mut self) {
        let idle = std::mem::take(&mut self.lock().idle);
        let mut tasks = Vec::new();
        for mut conn in idle {
            tasks.extend(conn.task.take());
            drop(conn); // drops the client: its task sends Terminate and ends
        }
        if let Some(rt) = self.rt.take() {
            rt.block_on(async {
                let _ =
                    tokio::time::timeout(CLOSE_GRACE, futures_util::future::join_all(tasks)).await;
            });
            rt.shutdown_background();
        }
    }

    fn rt(&self) -> &Runtime {
        self.rt
            .as_ref()
            .expect("the runtime lives as long as the pool")
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Abort the connections' tasks, then stop the runtime without waiting for it
        // (a blocking DNS lookup must not hold up the host).
        std::mem::take(&mut self.lock().idle);
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// What `open` checks and creates on the first connection; see [`Pool::open`].
async fn setup(
    client: &Client,
    config: &Config,
    table: &str,
    sql: &Sql,
) -> Result<Statements, PluginError> {
    let target = &config.target;
    let pg = |context: &str| {
        let context = context.to_owned();
        move |e: tokio_postgres::Error| from_pg(Phase::Open, &context, target, &e)
    };
    let layout_mismatch = |why: String| {
        PluginError::invalid_config(format!(
            "offset store `postgres`: table {table} (server {target}) exists but is not an \
             offsets table of this plugin's layout: {why}; hint: set `table` to another \
             name (the plugin creates it), or see docs/operations.md for the layout"
        ))
    };

    let row = client
        .query_one(
            "SELECT current_setting('server_version_num')::int4, \
             current_setting('server_encoding')",
            &[],
        )
        .await
        .map_err(pg("check the server"))?;
    let version: i32 = row.get(0);
    let encoding: String = row.get(1);
    if version < MIN_SERVER_VERSION {
        return Err(PluginError::invalid_config(format!(
            "offset store `postgres`: server {target} runs PostgreSQL {version} \
             (server_version_num); the plugin needs PostgreSQL 10 or newer"
        )));
    }
    if encoding != "UTF8" && encoding != "SQL_ASCII" {
        return Err(PluginError::invalid_config(format!(
            "offset store `postgres`: the database (server {target}) has encoding {encoding}; \
             the plugin needs UTF8 (group and topic names are ordered by their UTF-8 bytes); \
             hint: CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0"
        )));
    }

    let row = client
        .query_one(
            "SELECT to_regclass($1::text) IS NOT NULL, \
             $2::text IS NULL OR EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $2::text)",
            &[&table, &config.schema],
        )
        .await
        .map_err(pg("look for the offsets table"))?;
    let (table_exists, schema_exists): (bool, bool) = (row.get(0), row.get(1));
    if !table_exists {
        // An advisory lock serialises brokers creating the same table at once (CREATE
        // ... IF NOT EXISTS alone can fail with a unique violation when they race).
        // The statements run as one implicit transaction.
        let mut ddl = String::from("SELECT pg_advisory_xact_lock(7237124706104701298); ");
        if let (Some(schema), false) = (&config.schema, schema_exists) {
            ddl.push_str(&format!(
                "CREATE SCHEMA IF NOT EXISTS {}; ",
                layout::quote(schema)
            ));
        }
        ddl.push_str(&layout::create_table(table));
        client
            .batch_execute(&ddl)
            .await
            .map_err(pg(&format!("create table {table}")))?;
        tracing::info!(table, server = %target, "created the offsets table");
    }

    let stmts = match Statements::prepare(client, sql).await {
        Ok(stmts) => stmts,
        Err(e)
            if e.code().is_some_and(|c| {
                c.code().starts_with("42") && *c != SqlState::INSUFFICIENT_PRIVILEGE
            }) =>
        {
            let why = e
                .as_db_error()
                .map(|db| db.message().to_owned())
                .unwrap_or_default();
            return Err(layout_mismatch(why));
        }
        Err(e) => return Err(pg("prepare statements")(e)),
    };
    let expected = [
        Type::TEXT,
        Type::TEXT,
        Type::INT4,
        Type::INT8,
        Type::TEXT,
        Type::INT8,
    ];
    let found: Vec<&Type> = stmts
        .fetch_group
        .columns()
        .iter()
        .map(|c| c.type_())
        .collect();
    if found.iter().copied().ne(expected.iter()) {
        return Err(layout_mismatch(format!(
            "columns ({}) have types ({}), expected (text, text, integer, bigint, text, bigint)",
            layout::COLUMNS,
            found
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if let Err(e) = client.batch_execute(&sql.check_upsert).await {
        return Err(match e.as_db_error() {
            Some(db) if db.code() != &SqlState::INSUFFICIENT_PRIVILEGE => {
                layout_mismatch(db.message().to_owned())
            }
            _ => pg("check the table's key")(e),
        });
    }
    let rows = client
        .query(
            "SELECT a.attname::text, COALESCE(c.collname::text, '') \
             FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation \
             WHERE a.attrelid = to_regclass($1::text) AND a.attname IN ('group_id', 'topic') \
             AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table],
        )
        .await
        .map_err(pg("check the table's collations"))?;
    for row in rows {
        let (column, collation): (String, String) = (row.get(0), row.get(1));
        if collation != "C" && collation != "POSIX" {
            return Err(layout_mismatch(format!(
                "column {column} has collation \"{collation}\", not \"C\" (offsets must sort \
                 by the names' bytes; ALTER TABLE {table} ALTER COLUMN {column} TYPE text \
                 COLLATE \"C\" fixes it)"
            )));
        }
    }
    Ok(stmts)
}
