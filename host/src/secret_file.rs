//! Reading a one-line secret from a file (the admin API's token file, ZooKeeper's
//! digest file): the file must not be readable by group or others, and an error names
//! the file and the setting, never the contents.

use std::path::Path;

/// The first line of the file at `path` (a final `\n` or `\r\n` dropped), for the
/// setting `key` (named in errors). Errors: the file is unreadable, or on Unix its mode
/// lets group or others read it.
pub fn read_secret_line(key: &str, path: &Path) -> Result<Vec<u8>, String> {
    let what = |why: &str| format!("{key} {}: {why}", path.display());
    let text = std::fs::read(path).map_err(|e| what(&e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| what(&e.to_string()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(what(&format!(
                "mode {:o} lets group or others read it: chmod 600",
                mode & 0o777
            )));
        }
    }
    let line = text
        .strip_suffix(b"\n")
        .map(|t| t.strip_suffix(b"\r").unwrap_or(t))
        .unwrap_or(&text);
    Ok(line.to_vec())
}
