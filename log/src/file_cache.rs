//! [`FileCache`]: a broker-wide, bounded cache of open segment files, so the number of
//! file descriptors the logs hold does not grow with the number of segments.
//!
//! Kafka keeps every file of every segment open; a partition of many small segments
//! then needs thousands of descriptors. Here only each partition's active `.log` stays
//! open for good ([`SegmentFile::Pinned`]); every other file — the `.log` of sealed
//! segments and all `.index` / `.timeindex` files — is a [`CachedFile`]: opened on first
//! use, kept in the cache, and closed when the cache holds more than its capacity and
//! the file is the least recently used one. Handles are `Arc<File>`: a read that took a
//! handle keeps it valid (and its descriptor open) until it is done, even if the cache
//! evicts it or the segment is deleted meanwhile.
//!
//! A file is reopened by path, so a reopen checks that the path still names the same
//! file (device and inode recorded at the first open): a segment whose directory was
//! renamed away (topic deleted) and replaced by a new one of the same name is never
//! read through an old segment.

use std::{
    collections::{BTreeMap, HashMap},
    fs::{File, OpenOptions},
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use super::LogError;

/// Ids of cached files, unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A bounded least-recently-used cache of open files, shared by every partition log of
/// a broker (see the module docs). Thread-safe; one short mutex per access.
#[derive(Debug)]
pub struct FileCache {
    capacity: usize,
    inner: Mutex<Lru>,
}

#[derive(Debug, Default)]
struct Lru {
    /// Cached files by id: the handle and its last use.
    files: HashMap<u64, (Arc<File>, u64)>,
    /// Ids by last use, oldest first.
    order: BTreeMap<u64, u64>,
    /// Use counter.
    clock: u64,
    /// Opens since the cache was created (misses).
    opens: u64,
}

impl FileCache {
    /// Capacity of [`FileCache::with_default_capacity`], in open files: the default of
    /// `[log] open_files_cache`.
    pub const DEFAULT_CAPACITY: usize = 1024;

    /// A cache that keeps at most `capacity` files open (at least 1).
    pub fn new(capacity: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            capacity: capacity.max(1),
            inner: Mutex::new(Lru::default()),
        })
    }

    /// A cache of [`Self::DEFAULT_CAPACITY`] files.
    pub fn with_default_capacity() -> Arc<FileCache> {
        FileCache::new(Self::DEFAULT_CAPACITY)
    }

    /// The most files the cache keeps open.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Files open in the cache now (readers may hold a few evicted ones a while longer).
    pub fn len(&self) -> usize {
        self.lock().files.len()
    }

    /// Whether the cache holds no open file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times a file had to be opened because it was not in the cache.
    pub fn opens(&self) -> u64 {
        self.lock().opens
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lookup(&self, id: u64) -> Option<Arc<File>> {
        let mut lru = self.lock();
        lru.clock += 1;
        let now = lru.clock;
        let (file, used) = lru.files.get_mut(&id)?;
        let file = Arc::clone(file);
        let previous = std::mem::replace(used, now);
        lru.order.remove(&previous);
        lru.order.insert(now, id);
        Some(file)
    }

    fn insert(&self, id: u64, file: Arc<File>) -> Arc<File> {
        let mut lru = self.lock();
        lru.opens += 1;
        lru.clock += 1;
        let now = lru.clock;
        if let Some((existing, used)) = lru.files.get_mut(&id) {
            // Another thread opened it meanwhile: keep one handle.
            let existing = Arc::clone(existing);
            let previous = std::mem::replace(used, now);
            lru.order.remove(&previous);
            lru.order.insert(now, id);
            return existing;
        }
        lru.files.insert(id, (Arc::clone(&file), now));
        lru.order.insert(now, id);
        while lru.files.len() > self.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            lru.files.remove(&oldest);
        }
        file
    }

    fn forget(&self, id: u64) {
        let mut lru = self.lock();
        if let Some((_, used)) = lru.files.remove(&id) {
            lru.order.remove(&used);
        }
    }
}

/// One file reached through a [`FileCache`]: opened (read-write) on demand by path.
/// Dropping it closes the cached descriptor (readers holding a handle keep theirs).
#[derive(Debug)]
pub(super) struct CachedFile {
    id: u64,
    path: PathBuf,
    /// Device and inode of the file when first opened.
    identity: (u64, u64),
    cache: Arc<FileCache>,
}

impl CachedFile {
    /// Opens `path` (creating it if `create`) and puts it in `cache`.
    pub(super) fn open(
        cache: &Arc<FileCache>,
        path: &Path,
        create: bool,
    ) -> Result<CachedFile, LogError> {
        let file = open_rw(path, create).map_err(LogError::io(path))?;
        Self::adopt(cache, path, Arc::new(file))
    }

    /// Wraps a file already open at `path` (a segment's `.log` leaving the active
    /// segment); it is cached, and closed by the cache once it is least recently used.
    pub(super) fn adopt(
        cache: &Arc<FileCache>,
        path: &Path,
        file: Arc<File>,
    ) -> Result<CachedFile, LogError> {
        let meta = file.metadata().map_err(LogError::io(path))?;
        let cached = CachedFile {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            cache: Arc::clone(cache),
        };
        cache.insert(cached.id, file);
        Ok(cached)
    }

    /// The open file: from the cache, or reopened by path (and checked to be the same
    /// file).
    ///
    /// Errors: [`LogError::Io`] if it cannot be opened (no descriptors left, say) or the
    /// path now names another file (`NotFound`).
    pub(super) fn get(&self) -> Result<Arc<File>, LogError> {
        if let Some(file) = self.cache.lookup(self.id) {
            return Ok(file);
        }
        let file = open_rw(&self.path, false).map_err(LogError::io(&self.path))?;
        let meta = file.metadata().map_err(LogError::io(&self.path))?;
        if (meta.dev(), meta.ino()) != self.identity {
            return Err(LogError::Io {
                path: self.path.clone(),
                source: io::Error::new(
                    io::ErrorKind::NotFound,
                    "the segment file was replaced or removed",
                ),
            });
        }
        Ok(self.cache.insert(self.id, Arc::new(file)))
    }

    /// The file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        self.cache.forget(self.id);
    }
}

fn open_rw(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
}

/// A segment's `.log`: held open for good while the segment is active, or through the
/// cache once it is sealed.
#[derive(Debug)]
pub(super) enum SegmentFile {
    /// Open for the segment's lifetime (the active segment, written on every append).
    Pinned {
        /// The file.
        file: Arc<File>,
        /// Its path.
        path: PathBuf,
    },
    /// Opened on demand through the broker's [`FileCache`].
    Cached(CachedFile),
}

impl SegmentFile {
    /// The open file.
    ///
    /// Errors: as [`CachedFile::get`].
    pub(super) fn get(&self) -> Result<Arc<File>, LogError> {
        match self {
            SegmentFile::Pinned { file, .. } => Ok(Arc::clone(file)),
            SegmentFile::Cached(cached) => cached.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn keeps_at_most_capacity_files_open_and_reopens_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let files: Vec<CachedFile> = (0..5)
            .map(|i| {
                let path = dir.path().join(format!("{i}.log"));
                std::fs::File::create(&path)
                    .unwrap()
                    .write_all(&[i as u8; 3])
                    .unwrap();
                CachedFile::open(&cache, &path, false).unwrap()
            })
            .collect();
        assert_eq!(cache.len(), 2);
        for (i, f) in files.iter().enumerate() {
            let mut buf = [0; 3];
            std::os::unix::fs::FileExt::read_exact_at(&*f.get().unwrap(), &mut buf, 0).unwrap();
            assert_eq!(buf, [i as u8; 3]);
            assert!(cache.len() <= 2);
        }
        let opens = cache.opens();
        // The most recently used file is a hit.
        files[4].get().unwrap();
        assert_eq!(cache.opens(), opens);
        drop(files);
        assert!(cache.is_empty());
    }

    #[test]
    fn a_handle_in_use_survives_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1);
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"aaaa").unwrap();
        std::fs::write(&b, b"bbbb").unwrap();
        let fa = CachedFile::open(&cache, &a, false).unwrap();
        let handle = fa.get().unwrap();
        let _fb = CachedFile::open(&cache, &b, false).unwrap();
        std::fs::remove_file(&a).unwrap();
        let mut buf = [0; 4];
        std::os::unix::fs::FileExt::read_exact_at(&*handle, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"aaaa");
    }

    #[test]
    fn a_replaced_file_is_not_reopened_as_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1);
        let a = dir.path().join("a");
        std::fs::write(&a, b"old").unwrap();
        let fa = CachedFile::open(&cache, &a, false).unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, b"x").unwrap();
        let _evicts = CachedFile::open(&cache, &other, false).unwrap();
        // Renamed away (as a deleted topic's directory is) and replaced by a new file.
        std::fs::rename(&a, dir.path().join("a.old")).unwrap();
        std::fs::write(&a, b"new").unwrap();
        let err = fa.get().unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
    }
}
