//! [`TopicConfigStore`]: the durable per-topic config overrides of a standalone broker,
//! one file per topic, `<data_dir>/topic-configs/<topic>.json`, holding
//! `{"version":1,"config":{"retention.ms":"60000"}}` (the shape Kafka keeps under
//! `/config/topics/<topic>` in ZooKeeper). Files are replaced atomically (temporary
//! file, fsync, rename, directory fsync), so after a crash a topic has its old or its
//! new overrides, never a mix. A topic without overrides has no file.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::RwLock,
};

use serde::{Deserialize, Serialize};

use super::topic_config::Overrides;
use super::topics::write_atomically;

/// The on-disk (and ZooKeeper) form of one topic's overrides.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConfigFile {
    /// Always 1.
    pub version: u32,
    /// Kafka config name → value.
    pub config: Overrides,
}

impl ConfigFile {
    /// The file body for `config`.
    pub fn encode(config: &Overrides) -> Vec<u8> {
        serde_json::to_vec(&ConfigFile {
            version: 1,
            config: config.clone(),
        })
        .unwrap_or_default()
    }
}

/// Every topic's overrides, in memory and on disk.
#[derive(Debug)]
pub struct TopicConfigStore {
    dir: PathBuf,
    topics: RwLock<BTreeMap<String, Overrides>>,
}

impl TopicConfigStore {
    /// Loads `<data_dir>/topic-configs/` (created if missing). An unreadable file is
    /// an error naming it: silently dropping a topic's retention setting could delete
    /// data the operator meant to keep, or keep data meant to go.
    pub fn open(data_dir: &Path) -> std::io::Result<TopicConfigStore> {
        let dir = data_dir.join("topic-configs");
        std::fs::create_dir_all(&dir)?;
        let mut topics = BTreeMap::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let Some(name) = path
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_suffix(".json"))
            else {
                continue;
            };
            let text = std::fs::read(&path)?;
            let file: ConfigFile = serde_json::from_slice(&text).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?;
            topics.insert(name.to_owned(), file.config);
        }
        Ok(TopicConfigStore {
            dir,
            topics: RwLock::new(topics),
        })
    }

    /// The overrides of `topic` (empty if it has none).
    pub fn get(&self, topic: &str) -> Overrides {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces the overrides of `topic` durably (an empty map removes its file), then
    /// in memory.
    pub fn put(&self, topic: &str, config: &Overrides) -> std::io::Result<()> {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        let path = self.path(topic);
        if config.is_empty() {
            match std::fs::remove_file(&path) {
                Ok(()) => std::fs::File::open(&self.dir)?.sync_all()?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            topics.remove(topic);
        } else {
            write_atomically(&path, &ConfigFile::encode(config))?;
            topics.insert(topic.to_owned(), config.clone());
        }
        Ok(())
    }

    /// Replaces the in-memory overrides of `topic` without writing (cluster mode, where
    /// ZooKeeper holds them).
    pub fn cache(&self, topic: &str, config: Overrides) {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        if config.is_empty() {
            topics.remove(topic);
        } else {
            topics.insert(topic.to_owned(), config);
        }
    }

    fn path(&self, topic: &str) -> PathBuf {
        self.dir.join(format!("{topic}.json"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_survive_reopening_and_empty_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TopicConfigStore::open(dir.path()).unwrap();
        assert!(store.get("t").is_empty());
        let config: Overrides = [("retention.ms".to_owned(), "1000".to_owned())].into();
        store.put("t", &config).unwrap();
        store.put("other", &config).unwrap();
        let reopened = TopicConfigStore::open(dir.path()).unwrap();
        assert_eq!(reopened.get("t"), config);
        reopened.put("t", &Overrides::new()).unwrap();
        assert!(!dir.path().join("topic-configs/t.json").exists());
        let again = TopicConfigStore::open(dir.path()).unwrap();
        assert!(again.get("t").is_empty());
        assert_eq!(again.get("other"), config);
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("topic-configs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["other.json".to_owned()]);
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("topic-configs")).unwrap();
        std::fs::write(dir.path().join("topic-configs/t.json"), b"{not json").unwrap();
        let e = TopicConfigStore::open(dir.path()).unwrap_err();
        assert!(e.to_string().contains("t.json"), "{e}");
    }
}
