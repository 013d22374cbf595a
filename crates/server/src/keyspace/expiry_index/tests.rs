//! The expiry index's layout on a real store (the emulated device). Each test names the
//! mutation it catches.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tamer_store::{Db, DbOptions, DeviceKind};

use super::*;

fn store() -> Db {
    let device = DeviceKind::Emulated {
        latency_ns: 1_000,
        capacity_bytes: 16 << 20,
    };
    Db::open("unused", DbOptions::new(4 << 20).device(device).cores(1)).unwrap()
}

/// Every entry of (`slot`, `shard`), chunk by chunk, as stored.
fn read_all(db: &Db, slot: u64, shard: u8) -> Vec<Vec<IndexEntry>> {
    db.transaction(move |tx| {
        let n = chunks(tx, slot, shard)?;
        let mut out = Vec::new();
        for c in 0..n {
            let bytes = tx
                .get(&chunk_key(slot, shard, c))?
                .expect("a chunk the head names");
            out.push(decode_chunk(&bytes)?);
        }
        Ok(out)
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Appended entries are found in the slot of `max(expire-at, now)` and their key's shard,
    /// every one exactly once, in chunks within `CHUNK_BYTES` (or a single entry). Catches an
    /// entry put in the wrong slot or shard, one lost when a new chunk starts, a head not
    /// counting its chunks, or a chunk growing past its bound.
    #[test]
    fn entries_land_in_their_slot_within_bounded_chunks(
        writes in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..120), 0u64..5_000, 0u64..5_000), 1..300)
    ) {
        let db = store();
        let base_ms = 1_700_000_000_000u64;
        let mut expected: BTreeMap<(u64, u8), Vec<IndexEntry>> = BTreeMap::new();
        for (key, at, now) in &writes {
            let skey = crate::keyspace::store_key(1, key);
            let (at, now) = (base_ms + at, base_ms + now);
            let (k2, at2) = (skey.clone(), at);
            db.transaction(move |tx| append(tx, &k2, at2, now)).unwrap();
            let place = (slot_of(at.max(now)), shard_of(&skey));
            expected.entry(place).or_default().push(IndexEntry { store_key: skey, expire_at_ms: at });
        }
        for (&(slot, shard), want) in &expected {
            let chunks = read_all(&db, slot, shard);
            for c in &chunks {
                let bytes: usize = c.iter().map(|e| e.store_key.len() + ENTRY_OVERHEAD_BYTES).sum();
                prop_assert!(bytes <= CHUNK_BYTES || c.len() == 1, "a chunk of {} bytes", bytes);
                prop_assert!(!c.is_empty());
            }
            let got: Vec<IndexEntry> = chunks.into_iter().flatten().collect();
            prop_assert_eq!(&got, want);
        }
        // Nothing anywhere else: the records are exactly the heads and chunks expected.
        let records: usize = expected.keys().map(|&(s, sh)| 1 + read_all(&db, s, sh).len()).sum();
        prop_assert_eq!(db.len() as usize, records);
        db.close().unwrap();
    }

    /// A chunk cut anywhere but between entries is refused, never misread. Catches a decoder
    /// that reads a length past the chunk's end.
    #[test]
    fn cut_chunks_are_refused(keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..8),
                              cut in any::<prop::sample::Index>()) {
        let mut bytes = Vec::new();
        let mut bounds = vec![0];
        for (i, k) in keys.iter().enumerate() {
            encode_entry(&mut bytes, k, i as u64 + 1);
            bounds.push(bytes.len());
        }
        let cut = cut.index(bytes.len());
        let decoded = decode_chunk(&bytes[..cut]);
        prop_assert_eq!(decoded.is_ok(), bounds.contains(&cut));
        if let Ok(entries) = decoded {
            prop_assert_eq!(entries.len(), bounds.iter().position(|&b| b == cut).unwrap());
        }
    }
}

/// The cursor round-trips and walks every shard of a slot before the next slot. Catches a
/// shard skipped or a slot repeated.
#[test]
fn cursor_walks_every_shard_then_the_next_slot() {
    let mut c = Cursor::at_slot(7);
    let mut seen = Vec::new();
    for _ in 0..SHARDS {
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        seen.push((c.slot, c.shard));
        c = c.next_shard();
    }
    let want: Vec<(u64, u8)> = (0..SHARDS).map(|s| (7, s)).collect();
    assert_eq!(seen, want);
    assert_eq!(c, Cursor::at_slot(8));
    assert!(Cursor::decode(&[0; 12]).is_err());
    assert!(Cursor::decode(&[0, 0, 0, 0, 0, 0, 0, 0, SHARDS, 0, 0, 0, 0]).is_err());
}

/// Shards spread keys: 16,000 distinct keys fill every shard within ±15 % of even. Catches a
/// shard function that sends everything to one record (the hot record sharding avoids).
#[test]
fn shards_spread_keys() {
    let mut counts = [0u32; SHARDS as usize];
    for i in 0..16_000u32 {
        counts[shard_of(format!("key:{i}").as_bytes()) as usize] += 1;
    }
    let even = 16_000 / u32::from(SHARDS);
    for c in counts {
        assert!(c.abs_diff(even) * 100 <= even * 15, "{counts:?}");
    }
}
