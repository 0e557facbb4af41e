//! Throwaway timing; deleted after use.
use std::time::{Duration, Instant};

use drover_abi::OffsetRecord;
use drover_offsets_embedded::EmbeddedStore;

fn rec(g: usize, p: usize, o: i64) -> OffsetRecord {
    OffsetRecord {
        group: format!("group-{g}").into(),
        topic: "topic".into(),
        partition: p as i32,
        offset: o,
        metadata: "".into(),
        commit_time_ms: 0,
    }
}

fn main() {
    let base = std::env::args().nth(1).unwrap_or("/tmp".into());
    let dir = tempfile::TempDir::new_in(base).unwrap();
    let store =
        EmbeddedStore::open_with_config(&format!("path = '{}/o.redb'", dir.path().display()))
            .unwrap();
    let s = store.store();
    for &size in &[1usize, 100, 10_000] {
        let mut n = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            let batch: Vec<_> = (0..size).map(|i| rec(i % 50, i, n as i64)).collect();
            s.commit(&batch).unwrap();
            n += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "1 thread  batch {size:>6}: {:>8.0} commits/s, {:>10.0} records/s",
            n as f64 / secs,
            (n as f64 * size as f64) / secs
        );
    }
    for &threads in &[8usize] {
        for &size in &[1usize, 100] {
            let start = Instant::now();
            let total = std::sync::atomic::AtomicU64::new(0);
            std::thread::scope(|sc| {
                for t in 0..threads {
                    let total = &total;
                    sc.spawn(move || {
                        let mut n = 0;
                        while start.elapsed() < Duration::from_secs(3) {
                            let batch: Vec<_> =
                                (0..size).map(|i| rec(t, i, n as i64)).collect();
                            s.commit(&batch).unwrap();
                            n += 1;
                        }
                        total.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    });
                }
            });
            let n = total.load(std::sync::atomic::Ordering::Relaxed) as f64;
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{threads} threads batch {size:>6}: {:>8.0} commits/s, {:>10.0} records/s",
                n / secs,
                n * size as f64 / secs
            );
        }
    }
}
