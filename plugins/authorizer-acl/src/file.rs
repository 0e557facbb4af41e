//! Standalone storage: every binding in one file, rewritten whole on each change.
//!
//! The file is a header line then a JSON array, one binding per line:
//!
//! ```text
//! drover-acls 1 count=2 crc32c=1a2b3c4d
//! [
//! {"resource_type":"TOPIC","name":"orders","pattern_type":"LITERAL","principal":"User:alice","host":"*","operation":"READ","permission":"ALLOW"},
//! {"resource_type":"GROUP","name":"billing-","pattern_type":"PREFIXED","principal":"User:alice","host":"*","operation":"READ","permission":"ALLOW"}
//! ]
//! ```
//!
//! `crc32c` covers every byte after the header line and `count` is the number of
//! bindings. A change is written to `<path>.tmp`, `fsync`ed, renamed over the file and
//! the directory `fsync`ed, so after a crash the file holds either the old or the new
//! set. A file that does not parse, fails its checksum or count, or holds a binding this
//! build does not understand refuses to load (the authorizer then refuses to start)
//! rather than being read as "no ACLs", which would deny everyone but super users (or,
//! with `allow_everyone_if_no_acl_found`, allow everyone). A missing file is an empty set
//! (the first start).

use std::{
    collections::BTreeSet,
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use drover_abi::{authorizer::AclBinding, PluginError};

use crate::acl::StoredBinding;

/// The first word of the header line.
const MAGIC: &str = "drover-acls";
/// The format version this build writes and reads.
const FORMAT: u32 = 1;

/// The ACL file of a standalone broker.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> PluginError {
    PluginError::unavailable(format!("authorizer `acl`: {what} {}: {e}", path.display()))
        .with_code(e.raw_os_error().unwrap_or(0))
}

impl FileStore {
    /// The store at `path` (nothing is read or created yet).
    pub fn new(path: PathBuf) -> FileStore {
        FileStore { path }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn temp_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_owned();
        name.push(".tmp");
        self.path.with_file_name(name)
    }

    /// Reads the file: the empty set when it does not exist. Errors: `InvalidConfig`
    /// for a corrupt file (named, with what is wrong and what to do), `Unavailable` for
    /// an I/O error.
    pub fn load(&self) -> Result<BTreeSet<AclBinding>, PluginError> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(
                    path = %self.path.display(),
                    "no ACL file yet: starting with no ACLs"
                );
                return Ok(BTreeSet::new());
            }
            Err(e) => return Err(io_error("cannot read the ACL file", &self.path, e)),
        };
        decode(&bytes).map_err(|why| {
            PluginError::invalid_config(format!(
                "authorizer `acl`: the ACL file {} is corrupt ({why}); refusing to start \
                 rather than run without its ACLs. Restore it from a backup, or move it \
                 away to start with no ACLs",
                self.path.display()
            ))
        })
    }

    /// Replaces the file with `acls`, durably (temporary file, fsync, rename, fsync of
    /// the directory). Errors: `Unavailable` (nothing changed on disk, or the rename
    /// happened but its directory entry may not be durable yet).
    pub fn save(&self, acls: &BTreeSet<AclBinding>) -> Result<(), PluginError> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&dir).map_err(|e| io_error("cannot create directory", &dir, e))?;
        let temp = self.temp_path();
        let write = || -> std::io::Result<()> {
            let mut file = fs::File::create(&temp)?;
            file.write_all(&encode(acls))?;
            file.sync_all()
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&temp);
            io_error("cannot write", &temp, e)
        })?;
        fs::rename(&temp, &self.path).map_err(|e| io_error("cannot rename onto", &self.path, e))?;
        fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error("cannot sync directory", &dir, e))
    }
}

/// The file's bytes for `acls`.
pub fn encode(acls: &BTreeSet<AclBinding>) -> Vec<u8> {
    let mut body = String::from("[\n");
    for (i, binding) in acls.iter().enumerate() {
        if i > 0 {
            body.push_str(",\n");
        }
        let line = serde_json::to_string(&StoredBinding::from_binding(binding))
            .expect("a binding serializes");
        body.push_str(&line);
    }
    body.push_str("\n]\n");
    let crc = crc32c::crc32c(body.as_bytes());
    let mut out = format!("{MAGIC} {FORMAT} count={} crc32c={crc:08x}\n", acls.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// The bindings of a file's bytes, or what is wrong with them.
pub fn decode(bytes: &[u8]) -> Result<BTreeSet<AclBinding>, String> {
    let newline = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("no header line (torn or truncated write?)")?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| "header is not UTF-8")?;
    let body = &bytes[newline + 1..];
    let words: Vec<&str> = header.split(' ').collect();
    let (count, crc) = match words.as_slice() {
        [MAGIC, format, count, crc] => {
            if *format != FORMAT.to_string() {
                return Err(format!(
                    "format version {format}, this build reads version {FORMAT}"
                ));
            }
            let count: usize = count
                .strip_prefix("count=")
                .and_then(|c| c.parse().ok())
                .ok_or("bad count in the header")?;
            let crc = crc
                .strip_prefix("crc32c=")
                .and_then(|c| u32::from_str_radix(c, 16).ok())
                .ok_or("bad checksum in the header")?;
            (count, crc)
        }
        _ => return Err(format!("not an ACL file header: `{header}`")),
    };
    let actual = crc32c::crc32c(body);
    if actual != crc {
        return Err(format!(
            "checksum mismatch: header says {crc:08x}, content is {actual:08x} (torn or \
             modified?)"
        ));
    }
    let stored: Vec<StoredBinding> =
        serde_json::from_slice(body).map_err(|e| format!("bad JSON: {e}"))?;
    if stored.len() != count {
        return Err(format!(
            "{} bindings, the header says {count}",
            stored.len()
        ));
    }
    stored
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.to_binding()
                .map_err(|e| format!("binding {}: {e}", i + 1))
        })
        .collect()
}
