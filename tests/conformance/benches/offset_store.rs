//! Offset-store benchmarks through the loaded plugins: durable commits with batches of
//! 1, 100 and 10,000 records (throughput is reported in records per second).
//!
//! `cargo bench -p drover-tests --bench offset_store`. Figures go in docs/benchmarks.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use drover_abi::{std_types::RString, OffsetRecord};
use drover_tests::{open_store, store_config, PluginDir, OFFSET_STORES};

fn commits(c: &mut Criterion) {
    let mut g = c.benchmark_group("commit");
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    for (lib, name) in OFFSET_STORES {
        let dir = PluginDir::new();
        let store = open_store(&dir, lib, &store_config(name, &dir));
        for batch_size in [1usize, 100, 10_000] {
            let mut offset = 0i64;
            g.throughput(Throughput::Elements(batch_size as u64));
            g.bench_function(BenchmarkId::new(*name, batch_size), |b| {
                b.iter(|| {
                    offset += 1;
                    let batch: Vec<OffsetRecord> = (0..batch_size)
                        .map(|i| OffsetRecord {
                            group: RString::from(format!("group-{}", i % 100)),
                            topic: RString::from("orders"),
                            partition: (i / 100) as i32,
                            offset,
                            metadata: RString::new(),
                            commit_time_ms: offset,
                        })
                        .collect();
                    store.commit(&batch).unwrap();
                })
            });
        }
        store.close().unwrap();
    }
    g.finish();
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, commits);
}
criterion_main!(group::benches);
