//! The demo's input: lines of real text files.
//!
//! By default every regular file in `/usr/share/common-licenses` (present on every
//! Debian system: the license texts of the base system), falling back to the
//! repository's `docs/*.md` elsewhere. Any files the user names replace them. Lines are
//! produced as they are — never generated filler.

use std::path::{Path, PathBuf};

/// Where the default input comes from.
pub const DEFAULT_INPUT_DIR: &str = "/usr/share/common-licenses";

/// One input line: which file, which line (1-based), the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Index of the file in the input list.
    pub file: usize,
    /// 1-based line number in that file.
    pub number: usize,
    /// The text, without the line break (lossy UTF-8).
    pub text: String,
}

/// The default input files: the regular files (not symlinks) of
/// [`DEFAULT_INPUT_DIR`], sorted; else `docs/*.md` under `repo`.
pub fn default_files(repo: &Path) -> Vec<PathBuf> {
    let from = |dir: &Path, keep: &dyn Fn(&Path) -> bool| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                    .map(|e| e.path())
                    .filter(|p| keep(p))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    };
    let licenses = from(Path::new(DEFAULT_INPUT_DIR), &|_| true);
    if !licenses.is_empty() {
        return licenses;
    }
    from(&repo.join("docs"), &|p| {
        p.extension().is_some_and(|e| e == "md")
    })
}

/// Reads every line of `files`; an unreadable file is an error naming it.
pub fn read_lines(files: &[PathBuf]) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    for (file, path) in files.iter().enumerate() {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read input {}: {e}", path.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            lines.push(Line {
                file,
                number: i + 1,
                text: line.to_owned(),
            });
        }
    }
    if lines.is_empty() {
        return Err("the input files hold no lines".into());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_of_each_file_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        std::fs::write(&a, "one\ntwo\n").unwrap();
        std::fs::write(&b, "three").unwrap();
        let lines = read_lines(&[a, b]).unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[2],
            Line {
                file: 1,
                number: 1,
                text: "three".into()
            }
        );
        assert!(read_lines(&[dir.path().join("missing")]).is_err());
    }
}
