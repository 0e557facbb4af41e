//! A structural check of an ELF shared object before `dlopen` maps it.
//!
//! `dlopen` maps each loadable segment straight from the file; a segment that reaches
//! past the end of a truncated file maps pages with nothing behind them, and the first
//! touch kills the whole broker with SIGBUS (a half-copied plugin, a download cut short).
//! So the loader checks, from the bytes it already read and hashed, that the file is a
//! 64-bit little-endian ELF shared object (what this host can load) whose program
//! headers, every segment they describe, and the section header table all lie inside the
//! file (the ELF-64 object file format: header at 0, `e_phoff`/`e_phnum`/`e_phentsize`,
//! `e_shoff`/`e_shnum`/`e_shentsize`; each program header's `p_offset` and `p_filesz`).

/// Why a file is not a whole, loadable ELF shared object for this host.
pub fn check(bytes: &[u8]) -> Result<(), String> {
    const HEADER: usize = 64;
    const PHDR_MIN: u64 = 56;
    const SHDR_MIN: u64 = 64;
    const ET_DYN: u16 = 3;
    let len = bytes.len() as u64;
    if bytes.len() < HEADER {
        return Err(format!(
            "a truncated ELF file: {len} bytes, shorter than the 64-byte ELF header"
        ));
    }
    if bytes[4] != 2 {
        return Err(format!(
            "a 32-bit ELF file (class {}); this broker loads 64-bit libraries",
            bytes[4]
        ));
    }
    if bytes[5] != 1 {
        return Err("a big-endian ELF file; this broker loads little-endian libraries".into());
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let kind = u16_at(16);
    if kind != ET_DYN {
        return Err(format!(
            "an ELF file of type {kind}, not a shared object (type 3)"
        ));
    }
    let inside = |what: &str, offset: u64, size: u64| -> Result<(), String> {
        match offset.checked_add(size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(format!(
                "a truncated or damaged ELF file: {what} ends past the end of the file \
                 (offset {offset} + {size} bytes; the file has {len})"
            )),
        }
    };
    let (phoff, phentsize, phnum) = (u64_at(32), u64::from(u16_at(54)), u64::from(u16_at(56)));
    if phnum == 0 || phentsize < PHDR_MIN {
        return Err(format!(
            "a damaged ELF file: {phnum} program headers of {phentsize} bytes"
        ));
    }
    inside("the program header table", phoff, phnum * phentsize)?;
    for i in 0..phnum {
        let at = (phoff + i * phentsize) as usize;
        let (offset, filesz) = (u64_at(at + 8), u64_at(at + 32));
        inside(&format!("segment {i}"), offset, filesz)?;
    }
    let (shoff, shentsize, shnum) = (u64_at(40), u64::from(u16_at(58)), u64::from(u16_at(60)));
    if shnum > 0 {
        if shentsize < SHDR_MIN {
            return Err(format!(
                "a damaged ELF file: section headers of {shentsize} bytes"
            ));
        }
        inside("the section header table", shoff, shnum * shentsize)?;
    }
    Ok(())
}

/// The smallest file [`check`] accepts: an ELF header and one loadable segment covering
/// the whole `total` bytes (for the loader's tests of the checks before this one).
#[cfg(test)]
pub(crate) fn minimal_library(total: usize) -> Vec<u8> {
    tests::library(total as u64, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A well-formed shared-object header with one PT_LOAD segment of `segment_end`
    /// bytes from offset 0, in a file of `total` bytes.
    pub(super) fn library(segment_end: u64, total: usize) -> Vec<u8> {
        let mut b = vec![0u8; total];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&3u16.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        b[64..68].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        b[64 + 8..64 + 16].copy_from_slice(&0u64.to_le_bytes()); // p_offset
        b[64 + 32..64 + 40].copy_from_slice(&segment_end.to_le_bytes()); // p_filesz
        b
    }

    #[test]
    fn whole_files_pass_and_truncated_ones_are_named() {
        check(&library(4096, 4096)).unwrap();
        let e = check(&library(4096, 1000)).unwrap_err();
        assert!(e.contains("segment 0 ends past the end of the file"), "{e}");
        assert!(e.contains("the file has 1000"), "{e}");
        let e = check(&library(4096, 4096)[..40]).unwrap_err();
        assert!(e.contains("shorter than the 64-byte ELF header"), "{e}");
        let mut huge = library(u64::MAX, 4096);
        huge[64 + 8..64 + 16].copy_from_slice(&8u64.to_le_bytes());
        assert!(check(&huge).unwrap_err().contains("segment 0"));
        let mut exe = library(4096, 4096);
        exe[16] = 2;
        assert!(check(&exe).unwrap_err().contains("not a shared object"));
    }

    #[test]
    fn a_real_plugin_passes_and_every_prefix_of_it_is_refused() {
        // Any shared object will do: the C library this test links against.
        let Some(lib) = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .iter()
        .find_map(|p| std::fs::read(p).ok()) else {
            return;
        };
        check(&lib).unwrap();
        for cut in [64, 1000, 4096, 100_000, lib.len() - 1] {
            assert!(check(&lib[..cut]).is_err(), "a {cut}-byte prefix passed");
        }
    }
}
