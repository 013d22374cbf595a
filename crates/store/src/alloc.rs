//! The page allocator's in-memory state: free extents of logical pages (by start and by size,
//! coalesced) and the high-water mark. Guarded by one `std::sync::Mutex` in the engine, held only for short
//! critical sections that never park and make no syscall (the engine grows the file outside
//! it).

use std::collections::{BTreeMap, BTreeSet};

#[derive(Default, Debug)]
pub struct FreeExtents {
    by_start: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
    pages: u64,
}

impl FreeExtents {
    pub fn pages(&self) -> u64 {
        self.pages
    }

    pub fn extents(&self) -> usize {
        self.by_start.len()
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_start.iter().map(|(&s, &n)| (s, n))
    }

    /// Best fit: the smallest extent of at least `n` pages; takes its first `n` pages.
    pub fn take(&mut self, n: u64) -> Option<u64> {
        let &(size, start) = self.by_size.range((n, 0)..).next()?;
        self.by_size.remove(&(size, start));
        self.by_start.remove(&start);
        if size > n {
            self.by_start.insert(start + n, size - n);
            self.by_size.insert((size - n, start + n));
        }
        self.pages -= n;
        Some(start)
    }

    /// Returns `n` pages from `start`, merging with free neighbours.
    pub fn give(&mut self, start: u64, n: u64) {
        // Invariants checked in release builds too: a double free would hand one page to two
        // records (each check is one ordered-map lookup).
        assert!(n > 0, "freeing an empty extent at page {start}");
        let (mut s, mut len) = (start, n);
        if let Some((&ps, &pn)) = self.by_start.range(..start).next_back() {
            assert!(ps + pn <= start, "double free of page {start}");
            if ps + pn == start {
                self.by_start.remove(&ps);
                self.by_size.remove(&(pn, ps));
                s = ps;
                len += pn;
            }
        }
        if let Some(&nn) = self.by_start.get(&(start + n)) {
            self.by_start.remove(&(start + n));
            self.by_size.remove(&(nn, start + n));
            len += nn;
        }
        assert!(
            self.by_start.range(start..start + n).next().is_none(),
            "double free of page {start}"
        );
        self.by_start.insert(s, len);
        self.by_size.insert((len, s));
        self.pages += n;
    }

    /// Takes pages `start..start + n` off the list; false (and nothing changed) unless one
    /// free extent holds them all. Recovery claims the pages a redone record lives in.
    pub fn remove(&mut self, start: u64, n: u64) -> bool {
        let Some((&s, &len)) = self.by_start.range(..=start).next_back() else {
            return false;
        };
        if s + len < start + n {
            return false;
        }
        self.by_start.remove(&s);
        self.by_size.remove(&(len, s));
        if start > s {
            self.by_start.insert(s, start - s);
            self.by_size.insert((start - s, s));
        }
        let end = s + len;
        if end > start + n {
            self.by_start.insert(start + n, end - start - n);
            self.by_size.insert((end - start - n, start + n));
        }
        self.pages -= n;
        true
    }

    /// Takes the extent ending at `end` (if any) off the list and returns its start: to lower
    /// the high-water mark.
    pub fn take_tail(&mut self, end: u64) -> Option<u64> {
        let (&s, &n) = self.by_start.range(..end).next_back()?;
        if s + n != end {
            return None;
        }
        self.by_start.remove(&s);
        self.by_size.remove(&(n, s));
        self.pages -= n;
        Some(s)
    }
}

/// An open data page: records are appended at `reserved` until it is full.
#[derive(Clone, Copy, Debug)]
pub struct OpenPage {
    pub page: u64,
    pub reserved: u32,
}

#[derive(Debug)]
pub struct Alloc {
    /// First never-allocated page.
    pub next_page: u64,
    pub free: FreeExtents,
    pub open: Option<OpenPage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_and_coalescing() {
        let mut f = FreeExtents::default();
        f.give(10, 2);
        f.give(20, 5);
        f.give(12, 1);
        assert_eq!(f.extents(), 2);
        assert_eq!(f.pages(), 8);
        assert_eq!(f.take(3), Some(10));
        assert_eq!(f.take(5), Some(20));
        assert_eq!(f.take(1), None);
        f.give(11, 1);
        f.give(10, 1);
        f.give(12, 1);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![(10, 3)]);
        assert_eq!(f.take_tail(13), Some(10));
        assert_eq!(f.pages(), 0);
    }

    #[test]
    fn remove_claims_a_range_inside_one_extent() {
        let mut f = FreeExtents::default();
        f.give(10, 10);
        assert!(f.remove(12, 3));
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![(10, 2), (15, 5)]);
        assert!(!f.remove(11, 2), "page 12 is not free");
        assert!(f.remove(10, 2));
        assert!(f.remove(19, 1));
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![(15, 4)]);
        assert_eq!(f.pages(), 4);
        assert_eq!(f.take(4), Some(15));
    }
}
