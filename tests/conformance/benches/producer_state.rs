//! The idempotence check on its own (docs/benchmarks.md, "Idempotent producers"): what
//! the produce path adds per batch with a producer id — `ProducerStates::check` then
//! `record` — on a partition that remembers 1, 1,000 or 10,000 producers, and the
//! snapshot written at a segment roll for 10,000 producers.
//!
//! ```sh
//! cargo bench -p drover-tests --bench producer_state
//! ```

use criterion::{criterion_main, BenchmarkId, Criterion};
use drover_host::log::{
    batch::BatchHeader,
    producer_state::{last_sequence, snapshot, Check, ProducerLimits, ProducerStates},
};

fn header(producer_id: i64, base_sequence: i32) -> BatchHeader {
    BatchHeader {
        base_offset: 0,
        batch_length: 49,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: 99,
        base_timestamp: 0,
        max_timestamp: 0,
        producer_id,
        producer_epoch: 0,
        base_sequence,
        records_count: 100,
    }
}

fn states(producers: i64) -> ProducerStates {
    let mut s = ProducerStates::new(ProducerLimits {
        expiration_ms: i64::MAX,
        max_producer_ids: 1_000_000,
        min_idle_for_eviction_ms: 0,
    });
    for id in 0..producers {
        s.record(&header(id, 0), id * 100, 0);
    }
    s
}

pub(crate) fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("check_and_record_per_batch");
    for producers in [1i64, 1_000, 10_000] {
        g.bench_with_input(
            BenchmarkId::from_parameter(producers),
            &producers,
            |b, &n| {
                let mut s = states(n);
                let mut seq = 100;
                let mut offset = n * 100;
                b.iter(|| {
                    let h = header(0, seq);
                    assert_eq!(s.check(&h, 1).unwrap(), Check::Append);
                    s.record(&h, offset, 1);
                    // The next batch's first sequence, wrapping after i32::MAX as Kafka's.
                    seq = match last_sequence(seq, 99) {
                        i32::MAX => 0,
                        last => last + 1,
                    };
                    offset += 100;
                });
            },
        );
    }
    g.finish();
    let s = states(10_000);
    c.bench_function("snapshot_encode_10000_producers", |b| {
        b.iter(|| snapshot::encode(1, s.entries()).len())
    });
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
criterion_main!(group::benches);
