//! Server-side paging and search of the admin API's lists (`?q=&page=&size=`), so the
//! console stays responsive with 10 000 groups or partitions (issue 32 item 1).
//!
//! `q` keeps the rows whose key contains it (case-insensitive), `page` counts from 0,
//! `size` is at most [`MAX_SIZE`] (default [`DEFAULT_SIZE`]). A list endpoint given
//! none of the three answers as before (the whole list, a JSON array); given any, it
//! answers a [`Paged`] envelope. Parameters are parsed by hand from the query string
//! (bounded: [`MAX_QUERY_LEN`] bytes, [`MAX_Q_LEN`] bytes of `q`).

use serde::Serialize;

/// Rows per page unless `size` says otherwise.
pub const DEFAULT_SIZE: usize = 50;
/// The largest `size` served; larger asks get this many.
pub const MAX_SIZE: usize = 1000;
/// The longest query string read; a longer one is a [`PageError`].
pub const MAX_QUERY_LEN: usize = 2048;
/// The longest search term.
pub const MAX_Q_LEN: usize = 256;

/// A request's paging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// Lower-cased search term; empty keeps every row.
    pub q: String,
    /// Page index, from 0.
    pub page: usize,
    /// Rows per page, 1..=[`MAX_SIZE`].
    pub size: usize,
}

impl Default for PageRequest {
    fn default() -> Self {
        PageRequest {
            q: String::new(),
            page: 0,
            size: DEFAULT_SIZE,
        }
    }
}

/// A bad query string (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// Longer than [`MAX_QUERY_LEN`], or `q` longer than [`MAX_Q_LEN`].
    #[error("query string too long")]
    TooLong,
    /// `page` or `size` is not a non-negative integer.
    #[error("`{0}` must be a non-negative integer")]
    NotANumber(&'static str),
    /// Bad percent-encoding or not UTF-8.
    #[error("query string is not valid percent-encoded UTF-8")]
    Encoding,
}

/// One page of rows, with how many matched in all.
#[derive(Debug, Serialize)]
pub struct Paged<T> {
    /// Rows matching `q`, over every page.
    pub total: usize,
    /// This page's index.
    pub page: usize,
    /// The page size used.
    pub size: usize,
    /// The rows of this page.
    pub items: Vec<T>,
}

/// The paging of `query` (the URI's query string): `None` when it names none of
/// `q`, `page`, `size` (the endpoint answers its whole list). Other keys are left to
/// the endpoint.
pub fn parse(query: Option<&str>) -> Result<Option<PageRequest>, PageError> {
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Ok(None);
    };
    if query.len() > MAX_QUERY_LEN {
        return Err(PageError::TooLong);
    }
    let mut out = PageRequest::default();
    let mut any = false;
    for (key, value) in pairs(query)? {
        match key.as_str() {
            "q" => {
                if value.len() > MAX_Q_LEN {
                    return Err(PageError::TooLong);
                }
                out.q = value.to_lowercase();
            }
            "page" => out.page = number(&value, "page")?,
            "size" => out.size = number(&value, "size")?.clamp(1, MAX_SIZE),
            _ => continue,
        }
        any = true;
    }
    Ok(any.then_some(out))
}

/// The decoded `key=value` pairs of a query string.
pub fn pairs(query: &str) -> Result<Vec<(String, String)>, PageError> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

fn number(value: &str, name: &'static str) -> Result<usize, PageError> {
    value.parse().map_err(|_| PageError::NotANumber(name))
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte.
fn decode(s: &str) -> Result<String, PageError> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = bytes.next().and_then(hex).ok_or(PageError::Encoding)?;
                let lo = bytes.next().and_then(hex).ok_or(PageError::Encoding)?;
                out.push(hi << 4 | lo);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| PageError::Encoding)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

impl PageRequest {
    /// Whether a row with `key` matches `q`.
    pub fn matches(&self, key: &str) -> bool {
        self.q.is_empty() || key.to_lowercase().contains(&self.q)
    }

    /// The rows of `rows` (in their order) matching `q` by `key`, cut to this page.
    pub fn apply<T>(
        &self,
        rows: impl IntoIterator<Item = T>,
        key: impl Fn(&T) -> &str,
    ) -> Paged<T> {
        let mut total = 0;
        let start = self.page.saturating_mul(self.size);
        let mut items = Vec::new();
        for row in rows {
            if !self.matches(key(&row)) {
                continue;
            }
            if total >= start && items.len() < self.size {
                items.push(row);
            }
            total += 1;
        }
        Paged {
            total,
            page: self.page,
            size: self.size,
            items,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_paging_keys_means_the_whole_list() {
        assert_eq!(parse(None), Ok(None));
        assert_eq!(parse(Some("")), Ok(None));
        assert_eq!(parse(Some("verbose=1")), Ok(None));
    }

    #[test]
    fn parses_decodes_and_bounds() {
        let p = parse(Some("q=Orders%2Deu+West&page=2&size=5000"))
            .unwrap()
            .unwrap();
        assert_eq!(p.q, "orders-eu west");
        assert_eq!(p.page, 2);
        assert_eq!(p.size, MAX_SIZE);
        assert_eq!(parse(Some("size=0")).unwrap().unwrap().size, 1);
        assert_eq!(parse(Some("page=-1")), Err(PageError::NotANumber("page")));
        assert_eq!(parse(Some("q=%zz")), Err(PageError::Encoding));
        assert_eq!(parse(Some("q=%ff")), Err(PageError::Encoding));
        assert_eq!(parse(Some(&"q=".repeat(1200))), Err(PageError::TooLong));
        assert_eq!(
            parse(Some(&format!("q={}", "a".repeat(MAX_Q_LEN + 1)))),
            Err(PageError::TooLong)
        );
    }

    #[test]
    fn pages_the_matching_rows_and_counts_them_all() {
        let rows: Vec<String> = (0..10_000).map(|i| format!("group-{i:05}")).collect();
        let p = PageRequest {
            q: "group-01".into(),
            page: 1,
            size: 300,
        };
        let page = p.apply(rows.iter(), |r| r.as_str());
        assert_eq!(page.total, 1000);
        assert_eq!(page.items.len(), 300);
        assert_eq!(page.items[0], "group-01300");
        let past = PageRequest {
            page: 99,
            ..p.clone()
        }
        .apply(rows.iter(), |r| r.as_str());
        assert_eq!((past.total, past.items.len()), (1000, 0));
        let all = PageRequest::default().apply(rows.iter(), |r| r.as_str());
        assert_eq!((all.total, all.items.len()), (10_000, DEFAULT_SIZE));
    }
}
