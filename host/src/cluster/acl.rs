//! ZooKeeper digest authentication and node ACLs (issue 29 item 7; docs/security.md,
//! "ZooKeeper").
//!
//! Whoever can write Drover's chroot owns the cluster: it places topics, hands out
//! coordinator slots, stages transactional offsets and writes the SCRAM credentials.
//! With `zookeeper.auth_digest_file` the broker's session authenticates with the
//! `digest` scheme (`user:password` from the file) and every node the host creates
//! gets the ACL [`nodes`] returns: all rights to the session's authenticated identity
//! (ZooKeeper's `auth` scheme: the digest user, whichever broker created the node, as
//! long as every broker uses the same file), read to anyone. Without it, nodes are open
//! to anyone, as before.
//!
//! The identity is set once per process, at startup ([`authenticate_with`]), before
//! the cluster connects.
//!
//! Nodes that exist already — made before the digest was configured — get the same ACL
//! when the first session of the process connects ([`restrict_existing`]): every node
//! below the chroot, and the chroot itself, that is still open (any right beyond read
//! for `world:anyone`). Nodes with any other ACL (an operator's, another identity's)
//! are left as they are.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        OnceLock,
    },
};

use zookeeper_client as zk;

/// The `digest` credentials (`user:password`) of this process's sessions.
static DIGEST: OnceLock<Vec<u8>> = OnceLock::new();

/// All rights for the session's authenticated identity, read for anyone.
static RESTRICTED: [zk::Acl; 2] = [
    zk::Acl::new_const(zk::Permission::ALL, "auth", ""),
    zk::Acl::new_const(zk::Permission::READ, "world", "anyone"),
];

/// Reads `user:password` from `path` (one line; the final newline dropped; a file
/// group or others may read is refused). Errors name the file, never its contents.
pub fn read_digest_file(path: &Path) -> Result<Vec<u8>, String> {
    let what = |why: &str| format!("zookeeper.auth_digest_file {}: {why}", path.display());
    let line = crate::secret_file::read_secret_line("zookeeper.auth_digest_file", path)?;
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return Err(what("expected one line `user:password`"));
    };
    if colon == 0 || colon + 1 == line.len() || line.iter().any(|b| b.is_ascii_control()) {
        return Err(what(
            "expected one line `user:password`, both non-empty, no control characters",
        ));
    }
    Ok(line)
}

/// Makes this process's ZooKeeper sessions authenticate with `digest` (`user:password`)
/// and its nodes restricted to that identity. Once per process; a second call with
/// other credentials is an error.
pub fn authenticate_with(digest: Vec<u8>) -> Result<(), String> {
    let set = DIGEST.get_or_init(|| digest.clone());
    if *set != digest {
        return Err("zookeeper.auth_digest_file: another identity is already in use".into());
    }
    Ok(())
}

/// The `digest` credentials sessions add, if any.
pub fn digest() -> Option<&'static [u8]> {
    DIGEST.get().map(Vec::as_slice)
}

/// The ACL of every node the host creates: all rights for the authenticated identity
/// and read for anyone with `zookeeper.auth_digest_file`; all rights for anyone
/// without.
pub fn nodes() -> zk::Acls<'static> {
    match DIGEST.get() {
        Some(_) => zk::Acls::new(&RESTRICTED),
        None => zk::Acls::anyone_all(),
    }
}

/// Whether [`restrict_existing`] has gone through the tree once in this process.
static EXISTING_RESTRICTED: AtomicBool = AtomicBool::new(false);

/// Whether `acl` gives anyone more than read.
fn open(acl: &[zk::Acl]) -> bool {
    acl.iter().any(|a| {
        a.scheme() == "world"
            && a.id() == "anyone"
            && (a.permission() | zk::Permission::READ) != zk::Permission::READ
    })
}

/// What [`restrict_existing`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Restricted {
    /// Nodes seen.
    pub nodes: usize,
    /// Open nodes given the digest ACL.
    pub changed: usize,
    /// Open nodes whose ACL could not be changed (NoAuth: another identity's).
    pub refused: usize,
}

/// With `zookeeper.auth_digest_file`, once per process: gives every open node (any
/// right beyond read for anyone) at and below the chroot of `client` the ACL of
/// [`nodes`]. `None` without a digest, when done before, or when the chroot is `/`
/// (the whole ensemble, other applications' nodes too: left alone, logged). Nodes
/// that disappear meanwhile, or whose ACL changes meanwhile, are skipped; an error of
/// the session stops it (the next session tries again).
pub async fn restrict_existing(
    client: &zk::Client,
    chroot: &str,
) -> Result<Option<Restricted>, String> {
    if DIGEST.get().is_none() || EXISTING_RESTRICTED.load(Ordering::Acquire) {
        return Ok(None);
    }
    if chroot == "/" {
        tracing::warn!(
            "zookeeper.chroot is `/`: nodes created before zookeeper.auth_digest_file keep \
             their ACL (docs/security.md, \"ZooKeeper\")"
        );
        EXISTING_RESTRICTED.store(true, Ordering::Release);
        return Ok(None);
    }
    let mut done = Restricted::default();
    let mut pending = vec!["/".to_owned()];
    while let Some(path) = pending.pop() {
        let (acl, stat) = match client.get_acl(&path).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => continue,
            Err(e) => return Err(format!("reading the ACL of {chroot}{path}: {e}")),
        };
        done.nodes += 1;
        if open(&acl) {
            match client
                .set_acl(&path, &RESTRICTED, Some(stat.aversion))
                .await
            {
                Ok(_) => done.changed += 1,
                Err(zk::Error::NoNode | zk::Error::BadVersion) => {}
                Err(zk::Error::NoAuth) => {
                    done.refused += 1;
                    tracing::warn!(
                        node = %format!("{chroot}{path}"),
                        "zookeeper: cannot restrict an open node (NoAuth)"
                    );
                }
                Err(e) => return Err(format!("setting the ACL of {chroot}{path}: {e}")),
            }
        }
        match client.get_children(&path).await {
            Ok((children, _)) => {
                let parent = if path == "/" { "" } else { path.as_str() };
                pending.extend(children.into_iter().map(|c| format!("{parent}/{c}")));
            }
            Err(zk::Error::NoNode | zk::Error::NoAuth) => {}
            Err(e) => return Err(format!("listing {chroot}{path}: {e}")),
        }
    }
    EXISTING_RESTRICTED.store(true, Ordering::Release);
    Ok(Some(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_acls_are_those_granting_anyone_more_than_read() {
        assert!(open(&zk::Acls::anyone_all()));
        assert!(!open(&RESTRICTED));
        assert!(!open(&zk::Acls::anyone_read()));
        assert!(!open(&zk::Acls::creator_all()));
        let write_for_anyone = [zk::Acl::new_const(
            zk::Permission::READ | zk::Permission::WRITE,
            "world",
            "anyone",
        )];
        assert!(open(&write_for_anyone));
    }

    #[test]
    fn digest_files_are_checked_and_never_quoted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zk.digest");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("drover:pa55word\n", 0o600);
        assert_eq!(read_digest_file(&path).unwrap(), b"drover:pa55word");
        for (text, mode, wanted) in [
            ("drover:pa55word", 0o640, "chmod 600"),
            ("droverpa55word", 0o600, "user:password"),
            (":pa55word", 0o600, "non-empty"),
            ("drover:", 0o600, "non-empty"),
            ("drover:pa55\nword", 0o600, "control"),
        ] {
            write(text, mode);
            let e = read_digest_file(&path).unwrap_err();
            assert!(e.contains(wanted), "{text:?}: {e}");
            assert!(!e.contains("pa55"), "the password is quoted: {e}");
        }
    }
}
