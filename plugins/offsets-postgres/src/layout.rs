//! The table and the SQL the store runs on it.
//!
//! ```sql
//! CREATE TABLE drover_offsets (
//!     group_id         text COLLATE "C" NOT NULL,
//!     topic            text COLLATE "C" NOT NULL,
//!     partition        integer NOT NULL,
//!     committed_offset bigint NOT NULL,
//!     metadata         text NOT NULL,
//!     commit_time_ms   bigint NOT NULL,   -- ms since the Unix epoch, broker clock
//!     PRIMARY KEY (group_id, topic, partition)
//! );
//! ```
//!
//! **Order.** The ABI orders keys by group, then topic, by the strings' UTF-8 bytes (Rust's
//! `str` order), then partition as a signed integer. The `"C"` collation compares text by
//! its bytes (`memcmp`, shorter first on a tie), which is that order for UTF-8, whatever
//! the database's default locale; so the primary key's B-tree is in key order and `scan`
//! is an index range scan: `WHERE (group_id, topic, partition) > ($1, $2, $3) ORDER BY
//! group_id, topic, partition LIMIT $4`. `list_groups` skips from group to group through
//! the same index (a recursive "loose index scan") instead of reading every offset.
//!
//! **Writes.** A commit is deduplicated (a later record for the same key wins; `ON
//! CONFLICT` cannot touch one row twice in a statement) and sorted by key, so concurrent
//! transactions lock rows in one order and cannot deadlock each other, then written as
//! `INSERT ... SELECT * FROM unnest($1::text[], ...) ON CONFLICT (group_id, topic,
//! partition) DO UPDATE`, [`UPSERT_CHUNK`] rows per statement, all in one transaction.
//!
//! **NUL.** PostgreSQL `text` cannot hold the NUL character, so a commit whose group,
//! topic or metadata contains one is refused (`InvalidInput`); reads with such a name
//! find nothing, and a `scan` from such a key starts where it would (see [`ScanFrom`]).

use drover_abi::OffsetKey;

/// Rows per `INSERT` statement of a commit (all statements of a commit share one
/// transaction). Keeps each statement well inside `statement_timeout`.
pub const UPSERT_CHUNK: usize = 10_000;

/// The columns every read returns, in this order.
pub const COLUMNS: &str = "group_id, topic, partition, committed_offset, metadata, commit_time_ms";

/// `name` as a quoted SQL identifier (`"` doubled), so any name works verbatim.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The table's name as SQL: `"schema"."table"` or `"table"`.
pub fn qualified(schema: Option<&str>, table: &str) -> String {
    match schema {
        Some(schema) => format!("{}.{}", quote(schema), quote(table)),
        None => quote(table),
    }
}

/// `CREATE TABLE IF NOT EXISTS` for `table` (qualified), with a comment for whoever
/// finds it in `psql`.
pub fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n\
         group_id text COLLATE \"C\" NOT NULL,\n\
         topic text COLLATE \"C\" NOT NULL,\n\
         partition integer NOT NULL,\n\
         committed_offset bigint NOT NULL,\n\
         metadata text NOT NULL,\n\
         commit_time_ms bigint NOT NULL,\n\
         PRIMARY KEY (group_id, topic, partition));\n\
         COMMENT ON TABLE {table} IS 'Committed consumer group offsets of Drover \
         (plugin postgres): (group, topic, partition) -> offset, metadata, commit time in ms \
         since the epoch'"
    )
}

/// The statements of one table; prepared once per connection.
#[derive(Debug, Clone)]
pub struct Sql {
    /// Upserts the rows of six parallel arrays.
    pub upsert: String,
    /// Plans (without running) an upsert of nothing: fails at open when the table has no
    /// unique index on the key, which `ON CONFLICT` needs (preparing does not check it).
    pub check_upsert: String,
    /// Offsets of group `$1` for the (topic, partition) pairs of `$2`, `$3`, in request
    /// order.
    pub fetch: String,
    /// Every offset of group `$1`, in key order.
    pub fetch_group: String,
    /// Every group, sorted, each once.
    pub list_groups: String,
    /// Deletes group `$1`.
    pub delete_group: String,
    /// The first `$1` offsets.
    pub scan_first: String,
    /// `$4` offsets after key (`$1`, `$2`, `$3`).
    pub scan_after_key: String,
    /// `$3` offsets after every key of topic `$2` of group `$1`, i.e. from the first topic
    /// of group `$1` greater than `$2`.
    pub scan_after_topic: String,
    /// `$2` offsets from the first group greater than `$1`.
    pub scan_after_group: String,
}

impl Sql {
    /// The statements for `table` (qualified, as from [`qualified`]).
    pub fn new(table: &str) -> Sql {
        let order = "ORDER BY group_id, topic, partition";
        Sql {
            upsert: upsert(
                table,
                "$1::text[], $2::text[], $3::int4[], $4::int8[], $5::text[], $6::int8[]",
            ),
            check_upsert: format!(
                "EXPLAIN {}",
                upsert(
                    table,
                    "'{}'::text[], '{}'::text[], '{}'::int4[], '{}'::int8[], '{}'::text[], \
                     '{}'::int8[]"
                )
            ),
            fetch: format!(
                "SELECT o.group_id, o.topic, o.partition, o.committed_offset, o.metadata, \
                 o.commit_time_ms \
                 FROM unnest($2::text[], $3::int4[]) WITH ORDINALITY AS q(topic, partition, n) \
                 JOIN {table} o ON o.group_id = $1::text AND o.topic = q.topic \
                 AND o.partition = q.partition ORDER BY q.n"
            ),
            fetch_group: format!("SELECT {COLUMNS} FROM {table} WHERE group_id = $1::text {order}"),
            list_groups: format!(
                "WITH RECURSIVE g(group_id) AS ( \
                 (SELECT group_id FROM {table} ORDER BY group_id LIMIT 1) \
                 UNION ALL \
                 SELECT (SELECT o.group_id FROM {table} o WHERE o.group_id > g.group_id \
                 ORDER BY o.group_id LIMIT 1) FROM g WHERE g.group_id IS NOT NULL) \
                 SELECT group_id FROM g WHERE group_id IS NOT NULL"
            ),
            delete_group: format!("DELETE FROM {table} WHERE group_id = $1::text"),
            scan_first: format!("SELECT {COLUMNS} FROM {table} {order} LIMIT $1::int8"),
            scan_after_key: format!(
                "SELECT {COLUMNS} FROM {table} \
                 WHERE (group_id, topic, partition) > ($1::text, $2::text, $3::int4) \
                 {order} LIMIT $4::int8"
            ),
            scan_after_topic: format!(
                "SELECT {COLUMNS} FROM {table} \
                 WHERE (group_id, topic) > ($1::text, $2::text) {order} LIMIT $3::int8"
            ),
            scan_after_group: format!(
                "SELECT {COLUMNS} FROM {table} WHERE group_id > $1::text {order} LIMIT $2::int8"
            ),
        }
    }

    /// Every statement, for preparing them together.
    pub fn all(&self) -> [&str; 9] {
        [
            &self.upsert,
            &self.fetch,
            &self.fetch_group,
            &self.list_groups,
            &self.delete_group,
            &self.scan_first,
            &self.scan_after_key,
            &self.scan_after_topic,
            &self.scan_after_group,
        ]
    }
}

/// The upsert of the rows of six parallel arrays given by `arrays` (SQL expressions).
fn upsert(table: &str, arrays: &str) -> String {
    format!(
        "INSERT INTO {table} ({COLUMNS}) SELECT * FROM unnest({arrays}) \
         ON CONFLICT (group_id, topic, partition) DO UPDATE SET \
         committed_offset = EXCLUDED.committed_offset, \
         metadata = EXCLUDED.metadata, commit_time_ms = EXCLUDED.commit_time_ms"
    )
}

/// Where a `scan` starts, for an `after` key whose strings may contain NUL (which no
/// stored key does).
///
/// For a string `a` whose first NUL is at byte `i`, and any string `s` without NUL:
/// `s > a` exactly when `s > a[..i]` (`s` cannot equal `a`, and `a[..i]` is the longest
/// NUL-free prefix, below `a` and above everything below `a`). So "after `(g, t, p)`"
/// with a NUL in `g` is "from the first group greater than `g[..i]`", and with a NUL only
/// in `t` it is "after every key of topic `t[..i]` of group `g`".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanFrom<'a> {
    /// From the first key.
    Start,
    /// Strictly after this stored-form key.
    AfterKey(&'a str, &'a str, i32),
    /// After every key of (group, topic).
    AfterTopic(&'a str, &'a str),
    /// After every key of this group.
    AfterGroup(&'a str),
}

impl<'a> ScanFrom<'a> {
    /// The start of a scan strictly after `after`.
    pub fn new(after: Option<&'a OffsetKey>) -> ScanFrom<'a> {
        let Some(key) = after else {
            return ScanFrom::Start;
        };
        let group = key.group.as_str();
        let topic = key.topic.as_str();
        if let Some(i) = group.find('\0') {
            return ScanFrom::AfterGroup(&group[..i]);
        }
        if let Some(i) = topic.find('\0') {
            return ScanFrom::AfterTopic(group, &topic[..i]);
        }
        ScanFrom::AfterKey(group, topic, key.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, topic: &str, partition: i32) -> OffsetKey {
        OffsetKey {
            group: group.into(),
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("drover_offsets"), "\"drover_offsets\"");
        assert_eq!(quote("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(qualified(Some("S"), "t"), "\"S\".\"t\"");
        assert_eq!(qualified(None, "t"), "\"t\"");
    }

    #[test]
    fn scan_from_keys_with_nul() {
        assert_eq!(ScanFrom::new(None), ScanFrom::Start);
        let k = key("g", "t", 3);
        assert_eq!(ScanFrom::new(Some(&k)), ScanFrom::AfterKey("g", "t", 3));
        let k = key("g\0x", "t", 3);
        assert_eq!(ScanFrom::new(Some(&k)), ScanFrom::AfterGroup("g"));
        let k = key("g", "t\0", 3);
        assert_eq!(ScanFrom::new(Some(&k)), ScanFrom::AfterTopic("g", "t"));
    }

    #[test]
    fn the_nul_prefix_rule() {
        // s > a  <=>  s > a[..i] for NUL-free s, checked on a few strings.
        let a = "g\0x";
        for s in ["", "f", "g", "g\u{1}", "ga", "h", "\u{7f}", "é"] {
            assert_eq!(s > a, s > "g", "{s:?}");
        }
    }

    #[test]
    fn statements_use_the_quoted_table() {
        let sql = Sql::new(&qualified(Some("s"), "t"));
        for statement in sql.all() {
            assert!(statement.contains("\"s\".\"t\""), "{statement}");
        }
        assert!(create_table("\"t\"").contains("COLLATE \"C\""));
    }
}
