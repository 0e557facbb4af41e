//! `drover plugins list` output: one row per file, as an aligned table or JSON lines.

use serde::Serialize;

use super::registry::PluginRegistry;

/// One file of the plugin directory.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// File name.
    pub file: String,
    /// Plugin kind, or `-` when refused before it was known.
    pub kind: String,
    /// Plugin name, or `-`.
    pub name: String,
    /// Plugin version, or `-`.
    pub version: String,
    /// drover-abi version it was built against, or `-`.
    pub abi: String,
    /// `ok`, or `refused: <reason>`.
    pub status: String,
    /// SHA-256 of the file, when it was read.
    pub sha256: Option<String>,
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
            let file = entry
                .path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            match &entry.result {
                Ok(p) => Row {
                    file,
                    kind: p.summary.kind.to_string(),
                    name: p.summary.name.clone(),
                    version: p.summary.version.clone(),
                    abi: p.summary.abi.clone(),
                    status: "ok".to_owned(),
                    sha256: Some(p.sha256.clone()),
                },
                Err(e) => {
                    let text = e.to_string();
                    let prefix = format!("{}: ", entry.path.display());
                    let reason = text.strip_prefix(&prefix).unwrap_or(&text);
                    Row {
                        file,
                        kind: "-".to_owned(),
                        name: "-".to_owned(),
                        version: "-".to_owned(),
                        abi: "-".to_owned(),
                        status: format!("refused: {reason}"),
                        sha256: None,
                    }
                }
            }
        })
        .collect()
}

/// An aligned text table with a header line.
pub fn render(rows: &[Row]) -> String {
    let header = ["FILE", "KIND", "NAME", "VERSION", "ABI", "STATUS"];
    let cells: Vec<[&str; 6]> = rows
        .iter()
        .map(|r| [&r.file[..], &r.kind, &r.name, &r.version, &r.abi, &r.status])
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
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
