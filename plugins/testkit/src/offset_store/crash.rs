//! Crash safety: a commit the store acknowledged survives `kill -9` of the process
//! that made it (the promise in [`drover_abi::offset_store`]).
//!
//! It takes two processes. The child opens the store and runs [`commit_until_killed`],
//! which commits batch after batch and prints the number of every acknowledged one;
//! the parent runs [`crash_safety`]: it starts the child, waits for enough
//! acknowledgements, kills it with SIGKILL, opens the store itself with the same config
//! and checks that the last acknowledged batch (or the one after it, which may have
//! been written without being acknowledged) is what the store holds. How the child is
//! started is the caller's: `drover plugins test` runs itself again with a hidden
//! subcommand, the repository's conformance tests run a small binary.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use drover_abi::offset_store::OffsetStoreArc;

use super::{
    props::{record, Store},
    Opener,
};

/// The child's side: commits batches `n` = 1, 2, … to `group`, each writing offset `n`
/// (metadata `batch n`) for partitions `0..keys` of topic `t`, and prints `n` on its
/// own line to `out` (flushed) once the store acknowledged it. Returns after `limit`
/// (the parent kills it long before), or with the first error.
pub fn commit_until_killed(
    store: &OffsetStoreArc,
    group: &str,
    keys: i32,
    out: &mut impl Write,
    limit: Duration,
) -> Result<(), String> {
    let s = Store(store);
    let started = Instant::now();
    let mut n = 0i64;
    while started.elapsed() < limit {
        n += 1;
        let batch: Vec<_> = (0..keys)
            .map(|p| record(group, "t", p, n, &format!("batch {n}")))
            .collect();
        s.commit(&batch)?;
        writeln!(out, "{n}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot report batch {n}: {e}"))?;
    }
    Ok(())
}

/// The parent's side: starts `child` (which must run [`commit_until_killed`] on the
/// same store, `group` and `keys`, printing to its standard output), waits until it
/// reported `acks` acknowledged batches, kills it with SIGKILL, then opens the store
/// with `open` and checks that each of the `keys` partitions holds the last
/// acknowledged offset or the one after it. Deletes `group` and closes the store
/// afterwards. The error says what went wrong (the child died early, a partition lost
/// its acknowledged offset, …).
pub fn crash_safety(
    child: &mut Command,
    open: &Opener<'_>,
    group: &str,
    keys: i32,
    acks: i64,
) -> Result<(), String> {
    let mut process = child
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the committing child: {e}"))?;
    let stdout = process.stdout.take().ok_or("the child has no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut acked = 0i64;
    let mut early = None;
    while acked < acks {
        match lines.next() {
            Some(Ok(line)) => match line.trim().parse() {
                Ok(n) => acked = n,
                Err(_) => {
                    early = Some(format!("the child printed {line:?}"));
                    break;
                }
            },
            _ => {
                early = Some(format!(
                    "the committing child exited after {acked} acknowledged batches"
                ));
                break;
            }
        }
    }
    let _ = process.kill(); // SIGKILL
    for line in lines.map_while(Result::ok) {
        if let Ok(n) = line.trim().parse() {
            acked = n;
        }
    }
    let _ = process.wait();
    if let Some(why) = early {
        return Err(why);
    }

    let store = open().map_err(|e| format!("the store did not open after the kill: {e}"))?;
    let s = Store(&store);
    let result = s.fetch_group(group).and_then(|got| {
        for p in 0..keys {
            match got
                .iter()
                .find(|r| r.partition == p && r.topic.as_str() == "t")
            {
                Some(r) if r.offset == acked || r.offset == acked + 1 => {}
                Some(r) => {
                    return Err(format!(
                    "after kill -9, partition {p} holds offset {}; batch {acked} was acknowledged",
                    r.offset
                ))
                }
                None => {
                    return Err(format!(
                        "after kill -9, partition {p} has no offset; batch {acked} was acknowledged"
                    ))
                }
            }
        }
        Ok(())
    });
    let _ = s.delete_group(group);
    let _ = store.close();
    result
}
