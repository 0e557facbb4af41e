//! A plugin file's bytes in memory of their own, given back to the operating system the
//! moment they are dropped.
//!
//! The loader reads every plugin file whole: it checks, hashes and copies exactly the
//! bytes it then loads (`checks`, `loader`), and a rescan reads every file of the
//! directory again to see which changed. In a `Vec` each read is one `malloc` of the
//! file's size (4–50 MiB). glibc serves a block that large from the calling thread's
//! arena once its dynamic mmap threshold has risen to the largest block freed so far
//! (up to 32 MiB), and freed memory at the top of a thread's arena stays with the process:
//! `malloc_trim` did not return it. Rescans run on whichever blocking thread is free, so
//! under load they spread over many arenas: measured on a debug broker, 30 rescans of a
//! 12.8 MB assignor kept 195 MB of such memory (issue 28 item 4; docs/benchmarks.md,
//! "Plugin rescans"). [`FileBytes`] holds the bytes in a private anonymous mapping of
//! their own instead, unmapped when dropped, whatever thread read them.

use std::{io::Read, ops::Deref, ptr::NonNull};

/// A file's bytes in their own anonymous mapping (module docs).
pub struct FileBytes {
    /// Start of the mapping (dangling when `mapped` is 0).
    ptr: NonNull<u8>,
    /// Bytes read.
    len: usize,
    /// Bytes mapped (0: nothing mapped).
    mapped: usize,
}

// SAFETY: a FileBytes owns its mapping alone; it hands out only shared slices of it.
unsafe impl Send for FileBytes {}
// SAFETY: as above; nothing is mutated through `&FileBytes`.
unsafe impl Sync for FileBytes {}

impl FileBytes {
    /// `head` followed by everything `reader` yields until its end, or until more than
    /// `limit` bytes were read in all (the caller refuses a result longer than `limit`).
    /// `size_hint`: the expected total (the file's length), mapped at once.
    pub fn read(
        head: &[u8],
        reader: &mut impl Read,
        size_hint: u64,
        limit: u64,
    ) -> std::io::Result<FileBytes> {
        // One byte more than expected, so that reaching the end needs no larger mapping.
        let cap_limit = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
        let first = usize::try_from(size_hint.saturating_add(1))
            .unwrap_or(usize::MAX)
            .max(head.len())
            .min(cap_limit.max(head.len()));
        let mut bytes = FileBytes::map(first)?;
        bytes.spare()[..head.len()].copy_from_slice(head);
        bytes.len = head.len();
        loop {
            if bytes.len == bytes.mapped {
                if bytes.len >= cap_limit {
                    return Ok(bytes);
                }
                // The file grew while it was read: a larger mapping, bounded by the limit.
                let mut larger = FileBytes::map(bytes.mapped.saturating_mul(2).min(cap_limit))?;
                larger.spare()[..bytes.len].copy_from_slice(&bytes);
                larger.len = bytes.len;
                bytes = larger;
            }
            let start = bytes.len;
            match reader.read(&mut bytes.spare()[start..]) {
                Ok(0) => return Ok(bytes),
                Ok(n) => bytes.len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// A fresh zeroed mapping of `size` bytes (at least one page), nothing read yet.
    fn map(size: usize) -> std::io::Result<FileBytes> {
        let size = size.max(1);
        // SAFETY: an anonymous private mapping at an address the kernel chooses touches
        // no existing memory; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(std::io::Error::last_os_error)?;
        Ok(FileBytes {
            ptr,
            len: 0,
            mapped: size,
        })
    }

    /// The whole mapping, writable.
    fn spare(&mut self) -> &mut [u8] {
        // SAFETY: `mapped` bytes from `ptr` are mapped readable and writable, zeroed by
        // the kernel, and owned by `self`, borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.mapped) }
    }
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the mapping were written by `read`; the
        // mapping lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made, once; no slice of it outlives
        // `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.mapped);
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Yields `data` in reads of at most `step` bytes.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.data.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn reads_the_head_and_the_rest_as_they_are() {
        let rest = data(100_000);
        let bytes = FileBytes::read(
            b"HEAD",
            &mut Trickle {
                data: &rest,
                step: 4096,
            },
            100_004,
            1 << 20,
        )
        .unwrap();
        assert_eq!(&bytes[..4], b"HEAD");
        assert_eq!(&bytes[4..], &rest[..]);
    }

    #[test]
    fn a_file_longer_than_its_hint_is_read_whole_and_a_shorter_one_as_it_is() {
        let rest = data(50_000);
        let grown = FileBytes::read(
            b"",
            &mut Trickle {
                data: &rest,
                step: 999,
            },
            10,
            1 << 20,
        )
        .unwrap();
        assert_eq!(&grown[..], &rest[..]);
        let shrunk = FileBytes::read(
            b"",
            &mut Trickle {
                data: &rest,
                step: 999,
            },
            1 << 19,
            1 << 20,
        )
        .unwrap();
        assert_eq!(shrunk.len(), rest.len());
    }

    #[test]
    fn reading_stops_one_byte_past_the_limit() {
        let rest = data(10_000);
        let bytes = FileBytes::read(
            b"",
            &mut Trickle {
                data: &rest,
                step: 300,
            },
            100,
            4_000,
        )
        .unwrap();
        assert_eq!(
            bytes.len(),
            4_001,
            "one byte more than the limit, then no more"
        );
        assert_eq!(&bytes[..], &rest[..4_001]);
    }

    #[test]
    fn an_empty_read_is_empty() {
        let bytes = FileBytes::read(b"", &mut std::io::empty(), 0, 100).unwrap();
        assert!(bytes.is_empty());
    }
}
