//! `drover plugins list` output: one row per file, as an aligned table or JSON lines.

use serde::{Deserialize, Serialize};

use std::path::Path;

use super::{loader::LoadedPlugin, registry::PluginRegistry};

/// One file of the plugin directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// File name.
    pub file: String,
    /// Plugin kind, or `-` when refused before it was known.
    pub kind: String,
    /// Plugin name, or `-`.
    pub name: String,
    /// Plugin version, or `-`.
    pub version: String,
    /// The version of its kind's interface it was built against (`3.0`), or `-`.
    pub abi: String,
    /// The version of that kind's interface this broker serves, or `-`: the plugin loads
    /// when the majors are equal and its minor is not newer.
    pub broker_abi: String,
    /// `ok`, or `refused: <reason>` (the reason with its hint).
    pub status: String,
    /// SHA-256 of the file, when it was read (also for most refused files).
    pub sha256: Option<String>,
    /// A running broker's assignors only (`GET /v1/plugins`, `drover plugins list
    /// --admin`): why the plugin is slow — a call of it runs past its budget
    /// (`coordinator.assignor_timeout_ms`), so its calls fail at once and groups use the
    /// default assignor — or `null`.
    #[serde(default)]
    pub slow: Option<String>,
}

impl Row {
    /// The row as one JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The rows of `registry`, in file-name order.
pub fn rows(registry: &PluginRegistry) -> Vec<Row> {
    registry
        .entries()
        .iter()
        .map(|entry| {
            let reason = entry.reason().unwrap_or_default();
            let outcome = entry.result.as_ref().map_err(|_| &reason);
            row(&entry.path, entry.sha256.as_deref(), outcome)
        })
        .collect()
}

/// The row of one file: the plugin loaded from it, or why it is refused.
pub fn row(path: &Path, sha256: Option<&str>, outcome: Result<&LoadedPlugin, &String>) -> Row {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    match outcome {
        Ok(p) => Row {
            file,
            kind: p.summary.kind.to_string(),
            name: p.summary.name.clone(),
            version: p.summary.version.clone(),
            abi: p.summary.abi.clone(),
            broker_abi: p.summary.kind.abi_version().to_string(),
            status: "ok".to_owned(),
            sha256: Some(p.sha256.clone()),
            slow: None,
        },
        Err(reason) => Row {
            file,
            kind: "-".to_owned(),
            name: "-".to_owned(),
            version: "-".to_owned(),
            abi: "-".to_owned(),
            broker_abi: "-".to_owned(),
            status: format!("refused: {reason}"),
            sha256: sha256.map(str::to_owned),
            slow: None,
        },
    }
}

/// An aligned text table with a header line (a slow assignor's STATUS is `ok; slow:
/// <why>`). Control characters in cells (a file name
/// can hold a newline) are escaped, so every row is one line.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "FILE",
        "KIND",
        "NAME",
        "VERSION",
        "ABI",
        "BROKER ABI",
        "STATUS",
    ];
    let escaped: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let status = match &r.slow {
                Some(why) => format!("{}; slow: {why}", r.status),
                None => r.status.clone(),
            };
            [
                &r.file,
                &r.kind,
                &r.name,
                &r.version,
                &r.abi,
                &r.broker_abi,
                &status,
            ]
            .map(|c| escape(c))
        })
        .collect();
    let cells: Vec<[&str; 7]> = escaped
        .iter()
        .map(|r| r.each_ref().map(|c| &c[..]))
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(cells.iter()) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if rows.is_empty() {
        out.push_str("(no *.so files)\n");
    }
    out
}

/// `text` with control characters written as escapes (`\n`, `\u{1b}`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(file: &str, status: &str) -> Row {
        Row {
            file: file.to_owned(),
            kind: "-".to_owned(),
            name: "-".to_owned(),
            version: "-".to_owned(),
            abi: "-".to_owned(),
            broker_abi: "-".to_owned(),
            status: status.to_owned(),
            sha256: None,
            slow: None,
        }
    }

    #[test]
    fn control_characters_cannot_fake_rows() {
        let fake = "x.so\nlibfake.so  assignor  range  0.1.0  1.0  ok\n.so";
        let text = render(&[
            row(fake, "refused: not a plugin library"),
            row("b.so", "ok"),
        ]);
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains(r"x.so\nlibfake.so"), "{text}");
        let escape_seq = render(&[row("a\u{1b}[2Jb.so", "ok")]);
        assert!(escape_seq.contains(r"a\u{1b}[2Jb.so"), "{escape_seq}");
    }
}
