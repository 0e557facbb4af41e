//! Compatibility fixture: `compat-journal`, an offset store built against the frozen
//! drover-abi 3.0 (offset-store ABI 3.0).
//!
//! Config: `path = "<file>"`. Every commit and group deletion is appended to the file as
//! one block of lines ending in `E`, then `fsync`ed before the call returns; opening
//! replays the complete blocks in order, so a block cut by a crash is ignored (all or
//! nothing). Strings are hex-encoded, so no escaping is needed. Committed offsets live in
//! a `BTreeMap` in key order. Small on purpose: it exists to prove that a store built
//! against an earlier ABI minor keeps loading and passing the offset-store suite.

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, Write},
    sync::Mutex,
};

use drover_abi::{
    sdk::{OffsetStorePlugin, PluginContext, PluginInfo},
    ErrorKind, OffsetKey, OffsetRecord, PluginError, TopicPartitions,
};

/// Kafka's `offset.metadata.max.bytes` default.
const MAX_METADATA_BYTES: usize = 4096;

type Value = (i64, String, i64);

struct State {
    file: Option<File>,
    offsets: BTreeMap<OffsetKey, Value>,
}

/// The plugin.
pub struct CompatJournal {
    state: Mutex<State>,
}

impl PluginInfo for CompatJournal {
    const NAME: &'static str = "compat-journal";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "compatibility fixture: fsynced journal, built on offset-store ABI 3.0";
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn key(group: &str, topic: &str, partition: i32) -> OffsetKey {
    OffsetKey {
        group: group.into(),
        topic: topic.into(),
        partition,
    }
}

fn record(k: &OffsetKey, v: &Value) -> OffsetRecord {
    OffsetRecord {
        group: k.group.clone(),
        topic: k.topic.clone(),
        partition: k.partition,
        offset: v.0,
        metadata: v.1.as_str().into(),
        commit_time_ms: v.2,
    }
}

fn io(e: std::io::Error) -> PluginError {
    PluginError::unavailable(format!("journal I/O: {e}"))
}

/// Replays the complete blocks of the journal.
fn replay(file: &File) -> Result<BTreeMap<OffsetKey, Value>, PluginError> {
    let mut offsets = BTreeMap::new();
    let mut block: Vec<Vec<String>> = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(io)?;
        let fields: Vec<String> = line.split(' ').map(str::to_owned).collect();
        if fields[0] != "E" {
            block.push(fields);
            continue;
        }
        for f in block.drain(..) {
            let bad = || PluginError::internal(format!("corrupt journal line: {}", f.join(" ")));
            match (f[0].as_str(), f.len()) {
                ("C", 7) => {
                    let k = key(
                        &unhex(&f[1]).ok_or_else(bad)?,
                        &unhex(&f[2]).ok_or_else(bad)?,
                        f[3].parse().map_err(|_| bad())?,
                    );
                    let v = (
                        f[4].parse().map_err(|_| bad())?,
                        unhex(&f[5]).ok_or_else(bad)?,
                        f[6].parse().map_err(|_| bad())?,
                    );
                    offsets.insert(k, v);
                }
                ("D", 2) => {
                    let group = unhex(&f[1]).ok_or_else(bad)?;
                    offsets.retain(|k: &OffsetKey, _| k.group.as_str() != group);
                }
                _ => return Err(bad()),
            }
        }
    }
    Ok(offsets)
}

impl CompatJournal {
    /// Appends one block and syncs it; the caller then applies it in memory.
    fn append(state: &mut State, lines: &[String]) -> Result<(), PluginError> {
        let file = state
            .file
            .as_mut()
            .ok_or_else(|| PluginError::new(ErrorKind::Closed, "the store is closed"))?;
        let mut text = lines.join("\n");
        text.push_str("\nE\n");
        file.write_all(text.as_bytes()).map_err(io)?;
        file.sync_data().map_err(io)
    }

    fn open_state(&self) -> Result<std::sync::MutexGuard<'_, State>, PluginError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.file.is_none() {
            return Err(PluginError::new(ErrorKind::Closed, "the store is closed"));
        }
        Ok(state)
    }
}

impl OffsetStorePlugin for CompatJournal {
    fn open(ctx: &PluginContext) -> Result<Self, PluginError> {
        let path = ctx
            .config
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "path").then(|| v.trim().trim_matches('"').to_owned())
            })
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                PluginError::invalid_config("compat-journal needs `path = \"<file>\"`")
            })?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io)?;
        let offsets = replay(&file)?;
        Ok(CompatJournal {
            state: Mutex::new(State {
                file: Some(file),
                offsets,
            }),
        })
    }

    fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        if let Some(r) = batch.iter().find(|r| r.metadata.len() > MAX_METADATA_BYTES) {
            return Err(PluginError::invalid_input(format!(
                "metadata of {} bytes for {}/{}; expected at most {MAX_METADATA_BYTES}",
                r.metadata.len(),
                r.topic,
                r.partition
            )));
        }
        let lines: Vec<String> = batch
            .iter()
            .map(|r| {
                format!(
                    "C {} {} {} {} {} {}",
                    hex(&r.group),
                    hex(&r.topic),
                    r.partition,
                    r.offset,
                    hex(&r.metadata),
                    r.commit_time_ms
                )
            })
            .collect();
        let mut state = self.open_state()?;
        Self::append(&mut state, &lines)?;
        for r in batch {
            let v = (r.offset, r.metadata.to_string(), r.commit_time_ms);
            state.offsets.insert(r.key(), v);
        }
        Ok(())
    }

    fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let state = self.open_state()?;
        let mut out = Vec::new();
        for tp in partitions {
            for &p in tp.partitions.iter() {
                let k = key(group, &tp.topic, p);
                if let Some(v) = state.offsets.get(&k) {
                    out.push(record(&k, v));
                }
            }
        }
        Ok(out)
    }

    fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        let state = self.open_state()?;
        Ok(state
            .offsets
            .iter()
            .filter(|(k, _)| k.group.as_str() == group)
            .map(|(k, v)| record(k, v))
            .collect())
    }

    fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        let state = self.open_state()?;
        let mut groups: Vec<String> = state.offsets.keys().map(|k| k.group.to_string()).collect();
        groups.dedup();
        Ok(groups)
    }

    fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        let mut state = self.open_state()?;
        Self::append(&mut state, &[format!("D {}", hex(group))])?;
        let before = state.offsets.len();
        state.offsets.retain(|k, _| k.group.as_str() != group);
        Ok((before - state.offsets.len()) as u64)
    }

    fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        if limit == 0 {
            return Err(PluginError::invalid_input("scan limit must be at least 1"));
        }
        let state = self.open_state()?;
        let range = match after {
            Some(a) => state.offsets.range((
                std::ops::Bound::Excluded(a.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => state.offsets.range(..),
        };
        Ok(range
            .take(limit as usize)
            .map(|(k, v)| record(k, v))
            .collect())
    }

    fn flush(&self) -> Result<(), PluginError> {
        self.open_state().map(drop)
    }

    fn close(&self) -> Result<(), PluginError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.file.take() {
            Some(file) => file.sync_all().map_err(io),
            None => Ok(()),
        }
    }
}

drover_abi::export_offset_store!(CompatJournal);
