//! The two ways the store reaches ZooKeeper, behind the few primitives the store logic
//! ([`crate::store`]) needs: batched reads, listing children, creating a path, and one
//! multi-operation.
//!
//! - [`Backend::Own`]: the store's own session ([`Connection`]), for a standalone
//!   broker. Reads are ZooKeeper multi-reads of [`READ_BATCH`] nodes, [`READS_IN_FLIGHT`]
//!   of them pipelined on the session; every request is bounded by `request_timeout_ms`.
//! - [`Backend::Broker`]: the broker's session, lent through `HostServices.zookeeper`
//!   in cluster mode (the ABI's synchronous `ZkSession`). Paths are below the broker's
//!   chroot; the host bounds every call (by its session timeout) and follows its
//!   session across expiries. The ABI has no multi-read, so a large read is spread over
//!   up to [`READS_IN_FLIGHT`] threads issuing single reads, which the host pipelines on
//!   its session. The ABI gives no node times: a Kafka 0.8 value read this way gets
//!   commit time 0 (see [`crate::layout`]). The session belongs to the broker: closing
//!   the store never closes it.
//!
//! Everything else — planning commits into multis within `max_multi_bytes`, conflict
//! retries, the layout — is shared, in [`crate::store`].

use std::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};

use drover_abi::{
    host::{ZkCreateMode, ZkOp, ZkSessionArc},
    std_types::{RStr, RVec},
    PluginError,
};
use futures_util::{stream, StreamExt, TryStreamExt};
use zookeeper_client::{
    Acls, CreateMode, CreateOptions, Error as ZkError, MultiReadResult, MultiWriteError,
};

use crate::{
    connection::Connection,
    errors::{code_is_unavailable, zk_code},
    store::Op,
};

/// Reads batched into one ZooKeeper multi-read (own session), and the least number of
/// reads worth a thread of their own (broker's session).
pub const READ_BATCH: usize = 256;
/// Multi-reads in flight at once on the store's own session; threads issuing reads at
/// once on the broker's session.
pub const READS_IN_FLIGHT: usize = 8;
/// Reads per thread below which reads over the broker's session stay on the calling
/// thread.
const READS_PER_THREAD: usize = 32;

/// ZooKeeper codes of the errors that mean "a concurrent change": NoNode, NodeExists,
/// NotEmpty.
const NO_NODE: i32 = -101;
const NODE_EXISTS: i32 = -110;
const NOT_EMPTY: i32 = -111;

/// Without `auth_digest_file`, nodes are created persistent and open to everyone, like
/// Kafka's ZooKeeper nodes without `zookeeper.set.acl`; restrict access with ACLs on
/// the chroot's parent or network policy.
pub const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());

/// All rights for the session's authenticated identity, read for anyone.
static RESTRICTED_ACL: [zookeeper_client::Acl; 2] = [
    zookeeper_client::Acl::new_const(zookeeper_client::Permission::ALL, "auth", ""),
    zookeeper_client::Acl::new_const(zookeeper_client::Permission::READ, "world", "anyone"),
];

/// With `auth_digest_file` (its own session): nodes are created persistent with
/// `RESTRICTED_ACL` (the digest user with every permission), as the broker's are with `zookeeper.auth_digest_file`.
pub fn restricted() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::new(&RESTRICTED_ACL))
}

/// One read of a batched read.
#[derive(Debug, Clone, Copy)]
pub enum Read<'a> {
    /// A node's data and modification time.
    Data(&'a str),
    /// A node's children.
    Children(&'a str),
}

/// What a read found (`None` in its place: no such node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The node's data and modification time (ms since the epoch; 0 when unknown, over
    /// the broker's session).
    Data {
        /// The node's bytes.
        data: Vec<u8>,
        /// `Stat.mtime`.
        mtime_ms: i64,
    },
    /// The node's children, unordered.
    Children(Vec<String>),
}

/// Why a primitive failed; the store turns it into a [`PluginError`] with
/// [`crate::errors::ErrorContext`] and what it was doing.
#[derive(Debug, Clone)]
pub enum Fault {
    /// An error of the store's own client.
    Zk(ZkError),
    /// An error returned by the broker's session (a ZooKeeper code in `code`).
    Broker(PluginError),
    /// An error that is already a complete store error (getting a session failed).
    Described(PluginError),
}

impl From<ZkError> for Fault {
    fn from(e: ZkError) -> Self {
        Fault::Zk(e)
    }
}

impl Fault {
    /// ZooKeeper's numeric code (0 when none).
    pub fn code(&self) -> i32 {
        match self {
            Fault::Zk(e) => zk_code(e),
            Fault::Broker(e) | Fault::Described(e) => e.code,
        }
    }

    /// Whether the node was missing (NoNode).
    fn is_no_node(&self) -> bool {
        match self {
            Fault::Zk(e) => matches!(e, ZkError::NoNode),
            Fault::Broker(e) => e.code == NO_NODE,
            Fault::Described(_) => false,
        }
    }

    /// Whether it is a node created, deleted or filled by another writer meanwhile.
    fn is_conflict(&self) -> bool {
        match self {
            Fault::Zk(e) => matches!(e, ZkError::NodeExists | ZkError::NoNode | ZkError::NotEmpty),
            Fault::Broker(e) => matches!(e.code, NO_NODE | NODE_EXISTS | NOT_EMPTY),
            Fault::Described(_) => false,
        }
    }

    /// Whether ZooKeeper refused access (NoAuth).
    pub fn is_no_auth(&self) -> bool {
        match self {
            Fault::Zk(e) => matches!(e, ZkError::NoAuth),
            Fault::Broker(e) => e.code == -102,
            Fault::Described(_) => false,
        }
    }

    /// Whether ZooKeeper cannot be reached or cannot serve now.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Fault::Zk(e) => crate::errors::is_unavailable(e),
            Fault::Broker(e) | Fault::Described(e) => {
                e.kind == drover_abi::ErrorKind::Unavailable || code_is_unavailable(e.code)
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Zk(e) => write!(f, "{e}"),
            Fault::Broker(e) | Fault::Described(e) => write!(f, "{}", e.message),
        }
    }
}

/// How a multi ended.
pub enum MultiOutcome {
    /// Applied.
    Done,
    /// Not applied: a node was created or deleted concurrently (at the path, when
    /// known); plan again.
    Conflict(String, Fault),
}

/// The broker's session, lent in cluster mode.
pub struct BrokerSession {
    session: ZkSessionArc,
}

/// Where the store's requests go.
pub enum Backend {
    /// The store's own session (standalone broker).
    Own(Box<Connection>),
    /// The broker's session (cluster mode).
    Broker(BrokerSession),
}

impl Backend {
    /// The backend over the broker's `session`.
    pub fn broker(session: ZkSessionArc) -> Backend {
        Backend::Broker(BrokerSession { session })
    }

    /// The children of `path`, `None` when it does not exist.
    pub fn children(&self, path: &str) -> Result<Option<Vec<String>>, Fault> {
        let result = match self {
            Backend::Own(conn) => conn.block_on(async {
                let client = conn.client().await.map_err(Fault::Described)?;
                conn.io(client.list_children(path)).await.map_err(Fault::Zk)
            }),
            Backend::Broker(b) => b.children(path),
        };
        match result {
            Ok(children) => Ok(Some(children)),
            Err(f) if f.is_no_node() => Ok(None),
            Err(f) => Err(f),
        }
    }

    /// Performs `reads`, in order; `None` in place of a node that does not exist.
    pub fn read_many(&self, reads: &[Read<'_>]) -> Result<Vec<Option<Found>>, Fault> {
        if reads.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Backend::Own(conn) => conn.block_on(read_many_own(conn, reads)),
            Backend::Broker(b) => b.read_many(reads),
        }
    }

    /// Creates `path` and its missing parents (empty, persistent); an existing node is
    /// fine.
    pub fn mkdir(&self, path: &str) -> Result<(), Fault> {
        match self {
            Backend::Own(conn) => conn.block_on(async {
                let client = conn.client().await.map_err(Fault::Described)?;
                match conn.io(client.mkdir(path, &conn.create_options())).await {
                    Ok(()) | Err(ZkError::NodeExists) => Ok(()),
                    Err(e) => Err(Fault::Zk(e)),
                }
            }),
            Backend::Broker(b) => b.mkdir(path),
        }
    }

    /// Sends `ops` as one multi-operation. A failure of one operation because of a
    /// concurrent change is [`MultiOutcome::Conflict`]; any other failure is an error.
    pub fn multi(&self, ops: &[Op]) -> Result<MultiOutcome, Fault> {
        match self {
            Backend::Own(conn) => conn.block_on(multi_own(conn, ops)),
            Backend::Broker(b) => match b.multi(ops) {
                Ok(()) => Ok(MultiOutcome::Done),
                // The ABI reports the failing operation's error, not its index.
                Err(f) if f.is_conflict() => Ok(MultiOutcome::Conflict(
                    "(a node of the multi-operation)".to_owned(),
                    f,
                )),
                Err(f) => Err(f),
            },
        }
    }

    /// Releases the backend: closes the store's own session and stops its runtime; the
    /// broker's session is left alone (it belongs to the broker).
    pub fn shutdown(self) {
        match self {
            Backend::Own(conn) => conn.shutdown(),
            Backend::Broker(_) => {}
        }
    }
}

/// Batched, pipelined multi-reads on the store's own session.
async fn read_many_own(conn: &Connection, reads: &[Read<'_>]) -> Result<Vec<Option<Found>>, Fault> {
    let client = conn.client().await.map_err(Fault::Described)?;
    let client = &client;
    let batches: Vec<Vec<Option<Found>>> = stream::iter(reads.chunks(READ_BATCH))
        .map(|batch| async move {
            let mut reader = client.new_multi_reader();
            for read in batch {
                match read {
                    Read::Data(path) => reader.add_get_data(path)?,
                    Read::Children(path) => reader.add_get_children(path)?,
                }
            }
            let results = conn.io(reader.commit()).await?;
            if results.len() != batch.len() {
                return Err(Fault::Zk(ZkError::UnexpectedError(format!(
                    "multi-read of {} nodes answered {} results",
                    batch.len(),
                    results.len()
                ))));
            }
            results
                .into_iter()
                .map(|r| match r {
                    MultiReadResult::Data { data, stat } => Ok(Some(Found::Data {
                        data,
                        mtime_ms: stat.mtime,
                    })),
                    MultiReadResult::Children { children } => Ok(Some(Found::Children(children))),
                    MultiReadResult::Error {
                        err: ZkError::NoNode,
                    } => Ok(None),
                    MultiReadResult::Error { err } => Err(Fault::Zk(err)),
                    other => Err(Fault::Zk(ZkError::UnexpectedError(format!(
                        "multi-read: unexpected result {other:?}"
                    )))),
                })
                .collect()
        })
        .buffered(READS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(batches.into_iter().flatten().collect())
}

/// One multi on the store's own session.
async fn multi_own(conn: &Connection, ops: &[Op]) -> Result<MultiOutcome, Fault> {
    let client = conn.client().await.map_err(Fault::Described)?;
    let mut writer = client.new_multi_writer();
    for op in ops {
        match op {
            Op::Dir(path) => writer.add_create(path, &[], &conn.create_options())?,
            Op::Create(path, data) => writer.add_create(path, data, &conn.create_options())?,
            Op::Set(path, data) => writer.add_set_data(path, data, None)?,
            Op::Delete(path) => writer.add_delete(path, None)?,
        }
    }
    match conn.io(async { Ok(writer.commit().await) }).await? {
        Ok(_) => Ok(MultiOutcome::Done),
        Err(MultiWriteError::OperationFailed { index, source }) => {
            let path = ops.get(index).map_or("?", Op::path).to_owned();
            let fault = Fault::Zk(source);
            if fault.is_conflict() {
                Ok(MultiOutcome::Conflict(path, fault))
            } else {
                Err(fault)
            }
        }
        Err(MultiWriteError::RequestFailed { source }) => Err(Fault::Zk(source)),
    }
}

impl BrokerSession {
    fn children(&self, path: &str) -> Result<Vec<String>, Fault> {
        self.session
            .children(RStr::from_str(path))
            .into_result()
            .map(|names| names.into_iter().map(String::from).collect())
            .map_err(Fault::Broker)
    }

    fn read_one(&self, read: &Read<'_>) -> Result<Option<Found>, Fault> {
        match *read {
            Read::Data(path) => self
                .session
                .get(RStr::from_str(path))
                .into_result()
                .map(|node| {
                    node.into_option().map(|node| Found::Data {
                        data: node.data.into_vec(),
                        mtime_ms: 0,
                    })
                })
                .map_err(Fault::Broker),
            Read::Children(path) => match self.children(path) {
                Ok(children) => Ok(Some(Found::Children(children))),
                Err(f) if f.is_no_node() => Ok(None),
                Err(f) => Err(f),
            },
        }
    }

    /// Single reads, on up to [`READS_IN_FLIGHT`] threads when there are many; stops
    /// at the first error.
    fn read_many(&self, reads: &[Read<'_>]) -> Result<Vec<Option<Found>>, Fault> {
        let threads = reads.len().div_ceil(READS_PER_THREAD).min(READS_IN_FLIGHT);
        if threads <= 1 {
            return reads.iter().map(|r| self.read_one(r)).collect();
        }
        let failed = AtomicBool::new(false);
        let per_thread = reads.len().div_ceil(threads);
        let parts: Vec<Result<Vec<Option<Found>>, Fault>> = std::thread::scope(|s| {
            let handles: Vec<_> = reads
                .chunks(per_thread)
                .map(|part| {
                    let failed = &failed;
                    s.spawn(move || {
                        let mut out = Vec::with_capacity(part.len());
                        for read in part {
                            if failed.load(Ordering::Relaxed) {
                                break;
                            }
                            match self.read_one(read) {
                                Ok(found) => out.push(found),
                                Err(f) => {
                                    failed.store(true, Ordering::Relaxed);
                                    return Err(f);
                                }
                            }
                        }
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Fault::Described(PluginError::internal(
                            "offset store `zookeeper`: a reader thread panicked",
                        )))
                    })
                })
                .collect()
        });
        let mut out = Vec::with_capacity(reads.len());
        let mut first_error = None;
        for part in parts {
            match part {
                Ok(found) => out.extend(found),
                // Prefer a real error over the early stops it caused elsewhere.
                Err(f) => {
                    first_error.get_or_insert(f);
                }
            }
        }
        match first_error {
            Some(f) => Err(f),
            None if out.len() == reads.len() => Ok(out),
            None => Err(Fault::Described(PluginError::internal(
                "offset store `zookeeper`: a batched read stopped early",
            ))),
        }
    }

    /// Creates `path`, then, if its parent is missing, each missing ancestor from the
    /// top down.
    fn mkdir(&self, path: &str) -> Result<(), Fault> {
        if path == "/" || path.is_empty() {
            return Ok(());
        }
        let create = |p: &str| match self
            .session
            .create(
                RStr::from_str(p),
                (&[][..]).into(),
                ZkCreateMode::Persistent,
            )
            .into_result()
        {
            Ok(_) => Ok(()),
            Err(e) if e.code == NODE_EXISTS => Ok(()),
            Err(e) => Err(Fault::Broker(e)),
        };
        match create(path) {
            Err(f) if f.is_no_node() => {}
            other => return other,
        }
        let mut end = 0;
        while let Some(i) = path[end + 1..].find('/') {
            end += 1 + i;
            create(&path[..end])?;
        }
        create(path)
    }

    fn multi(&self, ops: &[Op]) -> Result<(), Fault> {
        let ops: RVec<ZkOp> = ops
            .iter()
            .map(|op| match op {
                Op::Dir(path) => ZkOp::Create {
                    path: path.as_str().into(),
                    data: RVec::new(),
                    mode: ZkCreateMode::Persistent,
                },
                Op::Create(path, data) => ZkOp::Create {
                    path: path.as_str().into(),
                    data: data.as_slice().into(),
                    mode: ZkCreateMode::Persistent,
                },
                Op::Set(path, data) => ZkOp::SetData {
                    path: path.as_str().into(),
                    data: data.as_slice().into(),
                    version: -1,
                },
                Op::Delete(path) => ZkOp::Delete {
                    path: path.as_str().into(),
                    version: -1,
                },
            })
            .collect();
        self.session.multi(ops).into_result().map_err(Fault::Broker)
    }

    /// The broker's session id (0 while the broker has none), for logs.
    pub fn session_id(&self) -> i64 {
        self.session.session_id()
    }
}
