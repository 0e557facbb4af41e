//! The share-partition state machine's own cost (no log, no store, no network): one
//! member acquiring 500 records and accepting them, as 500 one-record batches and as
//! one 500-record batch, from a window that stays at its start (every record accepted
//! moves the start offset). `cargo bench -p drover-share`.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use drover_share::{AckBatch, AckType, LogBatch, MemberId, ShareLimits, SharePartition};

const RECORDS: i64 = 500;

fn batches(from: i64, per_batch: i64) -> Vec<LogBatch> {
    (0..RECORDS / per_batch)
        .map(|i| LogBatch {
            first_offset: from + i * per_batch,
            last_offset: from + (i + 1) * per_batch - 1,
            producer_id: -1,
            transactional: false,
            control: false,
        })
        .collect()
}

fn acquire_and_accept(c: &mut Criterion) {
    let member: MemberId = Arc::from("member");
    let mut group = c.benchmark_group("share_partition");
    group.throughput(Throughput::Elements(RECORDS as u64));
    for per_batch in [1, RECORDS] {
        group.bench_function(
            format!("acquire_accept_500_in_batches_of_{per_batch}"),
            |b| {
                let mut p = SharePartition::new(ShareLimits::default(), 0);
                let mut now = 0;
                b.iter(|| {
                    let from = p.next_fetch_offset().expect("room");
                    let got = p.acquire(&member, now, from, &batches(from, per_batch), &[], 500);
                    assert_eq!(got.count, RECORDS as usize);
                    let ack = AckBatch {
                        first_offset: from,
                        last_offset: from + RECORDS - 1,
                        types: vec![AckType::Accept],
                    };
                    p.acknowledge(&member, &[ack]).expect("accepted");
                    now += 1;
                });
            },
        );
    }
    group.finish();
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, acquire_and_accept);
}
criterion_main!(group::benches);
