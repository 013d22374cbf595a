use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn leaf() -> Vec<u8> {
    let mut b = vec![0u8; tamer_cache::PAGE_SIZE];
    init(&mut b, 0, 77);
    b
}

/// The leaf's entries as a map: key -> (page, inline value).
fn contents(b: &[u8]) -> BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> {
    (0..count(b))
        .map(|i| {
            let (k, v) = leaf_entry(b, i).expect("entry");
            (k.to_vec(), (v.page, v.inline.map(<[u8]>::to_vec)))
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, u32, Option<Vec<u8>>),
    Remove(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let key = prop::collection::vec(0u8..4, 1..40);
    let inline = prop::option::of(prop::collection::vec(any::<u8>(), 0..=INLINE_MAX));
    prop_oneof![
        4 => (key, 1u32..1000, inline).prop_map(|(k, p, v)| Op::Put(k, p, v)),
        1 => (0usize..64).prop_map(Op::Remove),
    ]
}

proptest! {
    /// A leaf under seeded random puts (new keys and replacements, with and without inline
    /// values) and removals holds exactly what a `BTreeMap` holds, stays well formed, and
    /// refuses a put only when the entry does not fit. Catches a wrong insertion point
    /// (order check), garbage not counted (heap check), a replacement that keeps the old
    /// value, a compaction that loses an entry.
    #[test]
    fn a_leaf_matches_a_map(ops in prop::collection::vec(op(), 1..400)) {
        let mut b = leaf();
        let mut model: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, page, inline) => {
                    let before = free(&b);
                    let size = LEAF_ENTRY_HEADER + k.len() + inline.as_ref().map_or(0, Vec::len);
                    match leaf_put(&mut b, &k, u64::from(page), 3, inline.as_deref()) {
                        LeafPut::NoRoom => {
                            let old = model.contains_key(&k).then(|| {
                                let i = search(&b, &k).unwrap().unwrap();
                                raw(&b, i).unwrap().len()
                            });
                            let room = before + old.unwrap_or(0);
                            let needed = size + if old.is_some() { 0 } else { 2 };
                            prop_assert!(room < needed, "refused with {room} free for {needed}");
                        }
                        LeafPut::Inserted => {
                            prop_assert!(model.insert(k, (u64::from(page), inline)).is_none());
                        }
                        LeafPut::Replaced { page: old, .. } => {
                            let was = model.insert(k, (u64::from(page), inline));
                            prop_assert_eq!(was.map(|w| w.0), Some(old));
                        }
                    }
                }
                Op::Remove(i) => {
                    if count(&b) > 0 {
                        let i = i % count(&b);
                        let k = key(&b, i).unwrap().to_vec();
                        remove_at(&mut b, i);
                        prop_assert!(model.remove(&k).is_some());
                    }
                }
            }
            prop_assert_eq!(check(&b), Ok(()));
            prop_assert_eq!(contents(&b), model.clone());
        }
    }

    /// A split keeps every entry, puts all keys below the separator on the left and the rest
    /// on the right, both halves non-empty; a merge puts them back. Catches an entry dropped
    /// at the split point, a separator taken from the wrong side.
    #[test]
    fn split_and_merge_keep_every_entry(keys in prop::collection::btree_set(
        prop::collection::vec(any::<u8>(), 1..300), 2..60)) {
        let mut b = leaf();
        for k in &keys {
            let inline = (k.len() <= INLINE_MAX).then_some(&k[..]);
            if leaf_put(&mut b, k, 9, 1, inline) == LeafPut::NoRoom {
                break;
            }
        }
        prop_assume!(count(&b) >= 2);
        let before = contents(&b);
        let mut right = leaf();
        let sep = split_off(&mut b, &mut right);
        prop_assert!(count(&b) >= 1 && count(&right) >= 1);
        prop_assert_eq!(check(&b), Ok(()));
        prop_assert_eq!(check(&right), Ok(()));
        prop_assert!(contents(&b).keys().all(|k| *k < sep));
        prop_assert!(contents(&right).keys().all(|k| *k >= sep));
        prop_assert_eq!(key(&right, 0).unwrap(), &sep[..]);
        prop_assert!(merged_used(&b, &right, &sep) <= PAYLOAD);
        merge(&mut b, &right, &sep);
        prop_assert_eq!(check(&b), Ok(()));
        prop_assert_eq!(contents(&b), before);
    }

    /// Reads never panic on arbitrary bytes (an optimistic reader may see a torn page).
    #[test]
    fn reads_never_panic_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), PAYLOAD),
                                      probe in prop::collection::vec(any::<u8>(), 0..20)) {
        let mut b = bytes;
        b.resize(tamer_cache::PAGE_SIZE, 0);
        put_u32(&mut b, 0, KIND_TREE);
        let _ = search(&b, &probe);
        let _ = child_for(&b, &probe);
        let _ = total(&b);
        let _ = check(&b);
        for i in 0..count(&b).min(NODE_ENTRIES_MAX + 2) {
            let _ = (key(&b, i), leaf_entry(&b, i), child(&b, i), raw(&b, i));
        }
    }
}

/// An inner node's split moves the separator up: the right half's first key is empty, its
/// child and count kept; `child_for` sends keys below the second key to the first child.
/// Catches the separator left in the right node, a count lost by the split.
#[test]
fn an_inner_split_moves_its_separator_up() {
    let mut b = vec![0u8; tamer_cache::PAGE_SIZE];
    init(&mut b, 1, 5);
    let children: Vec<(Vec<u8>, u64, u64)> = (0..40u64)
        .map(|i| {
            let key = if i == 0 {
                Vec::new()
            } else {
                format!("k{i:03}").into_bytes()
            };
            (key, 100 + i, i + 1)
        })
        .collect();
    become_inner(&mut b, 1, &children);
    assert_eq!(check(&b), Ok(()));
    assert_eq!(total(&b), Some((1..=40).sum()));
    assert_eq!(child_for(&b, b"a"), Some(0));
    assert_eq!(child_for(&b, b"k001"), Some(1));
    assert_eq!(child_for(&b, b"k0015"), Some(1));
    assert_eq!(child_for(&b, b"z"), Some(39));
    let mut right = vec![0u8; tamer_cache::PAGE_SIZE];
    init(&mut right, 1, 5);
    let sep = split_off(&mut b, &mut right);
    assert_eq!(check(&right), Ok(()));
    assert_eq!(key(&right, 0), Some(&b""[..]));
    let first = count(&b) as u64;
    assert_eq!(sep, format!("k{first:03}").into_bytes());
    assert_eq!(child(&right, 0), Some((100 + first, first + 1)));
    assert_eq!(
        total(&b).unwrap() + total(&right).unwrap(),
        (1..=40).sum::<u64>()
    );
    merge(&mut b, &right, &sep);
    assert_eq!(check(&b), Ok(()));
    assert_eq!(count(&b), 40);
    assert_eq!(key(&b, first as usize), Some(sep.as_slice()));
}
