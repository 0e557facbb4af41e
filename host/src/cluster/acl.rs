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

use std::{path::Path, sync::OnceLock};

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

#[cfg(test)]
mod tests {
    use super::*;

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
