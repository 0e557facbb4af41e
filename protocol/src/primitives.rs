//! Kafka's classic (non-flexible) primitive types, big-endian, with bounded readers.
//!
//! | Type              | Encoding                                                        |
//! |-------------------|-----------------------------------------------------------------|
//! | `INT8`…`INT64`    | two's complement, big-endian                                    |
//! | `BOOLEAN`         | one byte; 0 is false, anything else true (written as 1)         |
//! | `STRING`          | INT16 length N ≥ 0, then N bytes of UTF-8                       |
//! | `NULLABLE_STRING` | as STRING; length −1 means null (no bytes follow)               |
//! | `ARRAY`           | INT32 count N ≥ 0, then N elements; −1 means null where allowed |
//!
//! Readers take the input as `&mut Bytes` and advance it past what they read. Every
//! length and count is checked against the remaining input (and, for arrays, against a
//! cap from [`crate::limits`]) before anything is allocated. `what` names the field in
//! errors.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::limits::MAX_STRING_LEN;

/// Fails unless `n` more bytes remain.
fn need(buf: &Bytes, n: usize, what: &'static str) -> Result<(), DecodeError> {
    if buf.remaining() < n {
        Err(DecodeError::Truncated {
            what,
            needed: n,
            remaining: buf.remaining(),
        })
    } else {
        Ok(())
    }
}

/// Reads an INT8.
pub fn read_i8(buf: &mut Bytes, what: &'static str) -> Result<i8, DecodeError> {
    need(buf, 1, what)?;
    Ok(buf.get_i8())
}

/// Reads an INT16.
pub fn read_i16(buf: &mut Bytes, what: &'static str) -> Result<i16, DecodeError> {
    need(buf, 2, what)?;
    Ok(buf.get_i16())
}

/// Reads an INT32.
pub fn read_i32(buf: &mut Bytes, what: &'static str) -> Result<i32, DecodeError> {
    need(buf, 4, what)?;
    Ok(buf.get_i32())
}

/// Reads an INT64.
pub fn read_i64(buf: &mut Bytes, what: &'static str) -> Result<i64, DecodeError> {
    need(buf, 8, what)?;
    Ok(buf.get_i64())
}

/// Reads a BOOLEAN: 0 is false, any other value true (as Kafka reads it).
pub fn read_bool(buf: &mut Bytes, what: &'static str) -> Result<bool, DecodeError> {
    need(buf, 1, what)?;
    Ok(buf.get_u8() != 0)
}

/// Reads a NULLABLE_STRING.
pub fn read_nullable_string(
    buf: &mut Bytes,
    what: &'static str,
) -> Result<Option<String>, DecodeError> {
    let len = read_i16(buf, what)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 {
        return Err(DecodeError::InvalidLength {
            what,
            len: i32::from(len),
        });
    }
    let len = len as usize;
    need(buf, len, what)?;
    let raw = buf.split_to(len);
    match std::str::from_utf8(&raw) {
        Ok(s) => Ok(Some(s.to_owned())),
        Err(_) => Err(DecodeError::InvalidUtf8 { what }),
    }
}

/// Reads a STRING (null refused).
pub fn read_string(buf: &mut Bytes, what: &'static str) -> Result<String, DecodeError> {
    read_nullable_string(buf, what)?.ok_or(DecodeError::UnexpectedNull { what })
}

/// Reads an ARRAY count that may be null (−1), checking it against `max` and against
/// the remaining input at `min_element_size` bytes per element.
pub fn read_nullable_array_len(
    buf: &mut Bytes,
    what: &'static str,
    max: usize,
    min_element_size: usize,
) -> Result<Option<usize>, DecodeError> {
    let count = read_i32(buf, what)?;
    if count == -1 {
        return Ok(None);
    }
    if count < 0 {
        return Err(DecodeError::InvalidLength { what, len: count });
    }
    let count = count as usize;
    if count > max {
        return Err(DecodeError::TooManyElements { what, count, max });
    }
    // count <= max <= 100_000 and min_element_size is small: no overflow.
    need(buf, count.saturating_mul(min_element_size), what)?;
    Ok(Some(count))
}

/// Reads a non-nullable ARRAY count; see [`read_nullable_array_len`].
pub fn read_array_len(
    buf: &mut Bytes,
    what: &'static str,
    max: usize,
    min_element_size: usize,
) -> Result<usize, DecodeError> {
    read_nullable_array_len(buf, what, max, min_element_size)?
        .ok_or(DecodeError::UnexpectedNull { what })
}

/// Reads a non-nullable ARRAY whose elements `read` decodes.
pub fn read_array<T>(
    buf: &mut Bytes,
    what: &'static str,
    max: usize,
    min_element_size: usize,
    mut read: impl FnMut(&mut Bytes) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let count = read_array_len(buf, what, max, min_element_size)?;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(read(buf)?);
    }
    Ok(items)
}

/// Reads a nullable ARRAY whose elements `read` decodes.
pub fn read_nullable_array<T>(
    buf: &mut Bytes,
    what: &'static str,
    max: usize,
    min_element_size: usize,
    mut read: impl FnMut(&mut Bytes) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    let Some(count) = read_nullable_array_len(buf, what, max, min_element_size)? else {
        return Ok(None);
    };
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(read(buf)?);
    }
    Ok(Some(items))
}

/// Writes a BOOLEAN (1 or 0).
pub fn write_bool(buf: &mut BytesMut, value: bool) {
    buf.put_u8(u8::from(value));
}

/// Writes a STRING.
pub fn write_string(
    buf: &mut BytesMut,
    value: &str,
    what: &'static str,
) -> Result<(), EncodeError> {
    if value.len() > MAX_STRING_LEN {
        return Err(EncodeError::StringTooLong {
            what,
            len: value.len(),
        });
    }
    buf.put_i16(value.len() as i16);
    buf.put_slice(value.as_bytes());
    Ok(())
}

/// Writes a NULLABLE_STRING.
pub fn write_nullable_string(
    buf: &mut BytesMut,
    value: Option<&str>,
    what: &'static str,
) -> Result<(), EncodeError> {
    match value {
        None => {
            buf.put_i16(-1);
            Ok(())
        }
        Some(s) => write_string(buf, s, what),
    }
}

/// Writes a non-nullable ARRAY, each element with `write`.
pub fn write_array<T>(
    buf: &mut BytesMut,
    items: &[T],
    what: &'static str,
    max: usize,
    mut write: impl FnMut(&mut BytesMut, &T) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    if items.len() > max {
        return Err(EncodeError::TooManyElements {
            what,
            count: items.len(),
            max,
        });
    }
    // max is far below i32::MAX.
    buf.put_i32(items.len() as i32);
    for item in items {
        write(buf, item)?;
    }
    Ok(())
}

/// Writes a nullable ARRAY (`None` as count −1).
pub fn write_nullable_array<T>(
    buf: &mut BytesMut,
    items: Option<&[T]>,
    what: &'static str,
    max: usize,
    write: impl FnMut(&mut BytesMut, &T) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    match items {
        None => {
            buf.put_i32(-1);
            Ok(())
        }
        Some(items) => write_array(buf, items, what, max, write),
    }
}

/// Runs `f`, and on error truncates `buf` back to its length before the call, so a
/// failed encode leaves nothing behind.
pub(crate) fn atomic(
    buf: &mut BytesMut,
    f: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    let result = f(buf);
    if result.is_err() {
        buf.truncate(start);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings() {
        let mut out = BytesMut::new();
        write_string(&mut out, "héllo", "s").unwrap();
        write_nullable_string(&mut out, None, "s").unwrap();
        let mut input = out.freeze();
        assert_eq!(read_string(&mut input, "s").unwrap(), "héllo");
        assert_eq!(read_nullable_string(&mut input, "s").unwrap(), None);
        assert!(input.is_empty());
    }

    #[test]
    fn string_errors() {
        let mut null = Bytes::from_static(&[0xff, 0xff]);
        assert_eq!(
            read_string(&mut null, "s"),
            Err(DecodeError::UnexpectedNull { what: "s" })
        );
        let mut negative = Bytes::from_static(&[0xff, 0xfe]);
        assert_eq!(
            read_string(&mut negative, "s"),
            Err(DecodeError::InvalidLength { what: "s", len: -2 })
        );
        let mut short = Bytes::from_static(&[0, 3, b'a']);
        assert!(matches!(
            read_string(&mut short, "s"),
            Err(DecodeError::Truncated {
                needed: 3,
                remaining: 1,
                ..
            })
        ));
        let mut bad = Bytes::from_static(&[0, 1, 0xff]);
        assert_eq!(
            read_string(&mut bad, "s"),
            Err(DecodeError::InvalidUtf8 { what: "s" })
        );
        let long = "x".repeat(MAX_STRING_LEN + 1);
        let mut out = BytesMut::new();
        assert!(write_string(&mut out, &long, "s").is_err());
        assert!(write_string(&mut out, &long[1..], "s").is_ok());
    }

    #[test]
    fn array_counts() {
        // Count above the cap.
        let mut input = Bytes::from_static(&[0, 0, 0, 11]);
        assert!(matches!(
            read_array_len(&mut input, "a", 10, 1),
            Err(DecodeError::TooManyElements {
                count: 11,
                max: 10,
                ..
            })
        ));
        // Count within the cap but not backed by bytes.
        let mut input = Bytes::from_static(&[0, 0, 0, 3, 0, 0, 0, 0]);
        assert!(matches!(
            read_array_len(&mut input, "a", 10, 4),
            Err(DecodeError::Truncated {
                needed: 12,
                remaining: 4,
                ..
            })
        ));
        let mut input = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(read_nullable_array_len(&mut input, "a", 10, 4), Ok(None));
        let mut input = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            read_array_len(&mut input, "a", 10, 4),
            Err(DecodeError::UnexpectedNull { what: "a" })
        );
        let mut input = Bytes::from_static(&[0x80, 0, 0, 0]);
        assert_eq!(
            read_array_len(&mut input, "a", 10, 4),
            Err(DecodeError::InvalidLength {
                what: "a",
                len: i32::MIN
            })
        );
    }

    #[test]
    fn booleans() {
        let mut input = Bytes::from_static(&[0, 1, 7]);
        assert!(!read_bool(&mut input, "b").unwrap());
        assert!(read_bool(&mut input, "b").unwrap());
        assert!(read_bool(&mut input, "b").unwrap());
        assert!(read_bool(&mut input, "b").is_err());
    }

    #[test]
    fn failed_encode_leaves_buffer_unchanged() {
        let mut out = BytesMut::from(&b"keep"[..]);
        let long = "x".repeat(MAX_STRING_LEN + 1);
        let result = atomic(&mut out, |buf| {
            write_string(buf, "fine", "a")?;
            write_string(buf, &long, "b")
        });
        assert!(result.is_err());
        assert_eq!(&out[..], b"keep");
    }
}
