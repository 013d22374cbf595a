//! The eviction policy between page classes, as pure functions of a set's snapshot, so that
//! each rule is unit-tested without frames, locks or threads.
//!
//! A set holds data pages and index pages ([`crate::PageClass`]). Index pages are hot: every
//! point operation reads one (a hash bucket) before its record, so with the index resident a
//! cold record costs one device read instead of two. The rule: a set gives up a **data**
//! frame while it holds at most `index_ways_max` index frames, and an **index** frame once it
//! holds more (or when an incoming index page would exceed the bound). Within the chosen
//! class the victim is picked by CLOCK, clean frames first (see `PageCache::choose_victim`);
//! when the chosen class has no evictable frame at all the other class gives one up, so a
//! miss never waits for a class that happens to be pinned.
//!
//! `index_ways_max` defaults to `ways - 1`: at least one way of every set stays available to
//! data pages, whatever the index's size. When the index outgrows its share it is paged like
//! anything else (CLOCK among the set's index frames), never refused.

/// The class of a page, without its placement key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Data,
    Index,
}

/// Which class a set evicts from to make room for an `incoming` page, given the index frames
/// it holds now.
pub(crate) fn evict_from(incoming: Kind, index_frames: u32, index_ways_max: u32) -> Kind {
    match incoming {
        // Room for one more index page only below the bound.
        Kind::Index if index_frames >= index_ways_max => Kind::Index,
        Kind::Index => Kind::Data,
        // A set over its bound (it filled up with index pages while the bound was lower, or
        // through empty ways) gives index frames back to data first.
        Kind::Data if index_frames > index_ways_max => Kind::Index,
        Kind::Data => Kind::Data,
    }
}

/// TinyLFU's admission test: a data page that missed takes CLOCK's victim's frame only if it
/// was asked for more often than the victim lately; otherwise it takes the set's probationary
/// frame (see `PageCache::admit`). Ties keep the victim (it is resident: its frequency is
/// known to be real, the candidate's may be a collision's).
pub(crate) fn admits(candidate_frequency: u8, victim_frequency: u8) -> bool {
    candidate_frequency > victim_frequency
}

/// Whether the cleaner writes back a dirty, unreferenced frame ahead of its eviction: data
/// pages asked for at most `frequency_max` times lately (the ones admission will let go);
/// not index pages (kept ahead of data) nor frequently asked data pages (kept by admission:
/// cleaning them only writes them again once they are dirtied again).
pub(crate) fn worth_cleaning(index_page: bool, frequency: u8, frequency_max: u8) -> bool {
    !index_page && frequency <= frequency_max
}

/// The class to try when `first` has no evictable frame.
pub(crate) fn other(first: Kind) -> Kind {
    match first {
        Kind::Data => Kind::Index,
        Kind::Index => Kind::Data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_misses_evict_data_while_the_index_is_within_its_bound() {
        // Mutation caught: index frames evicted by data misses (the index pages again).
        for held in 0..=7 {
            assert_eq!(
                evict_from(Kind::Data, held, 7),
                Kind::Data,
                "{held} index frames"
            );
        }
    }

    #[test]
    fn a_set_over_its_index_bound_gives_index_frames_back_to_data() {
        assert_eq!(evict_from(Kind::Data, 8, 7), Kind::Index);
        assert_eq!(evict_from(Kind::Data, 3, 2), Kind::Index);
    }

    #[test]
    fn index_misses_take_data_frames_below_the_bound_and_index_frames_at_it() {
        // Mutations caught: an index page that never displaces data (the index would never
        // become resident), or one that grows the set's index past its bound.
        assert_eq!(evict_from(Kind::Index, 0, 7), Kind::Data);
        assert_eq!(evict_from(Kind::Index, 6, 7), Kind::Data);
        assert_eq!(evict_from(Kind::Index, 7, 7), Kind::Index);
        assert_eq!(evict_from(Kind::Index, 9, 7), Kind::Index);
    }

    /// Mutation caught: admitting on ties (a page seen as often as the victim, maybe only by
    /// a sketch collision, would push it out) or refusing a more frequent page.
    #[test]
    fn only_a_more_frequent_page_takes_the_victims_frame() {
        assert!(admits(3, 2));
        assert!(!admits(2, 2));
        assert!(!admits(0, 5));
        assert!(admits(15, 14));
    }

    /// Mutations caught: cleaning hot data pages (written again and again) or index pages,
    /// or not cleaning the rarely asked ones a miss will evict.
    #[test]
    fn the_cleaner_writes_back_only_pages_admission_lets_go() {
        assert!(worth_cleaning(false, 0, 2));
        assert!(worth_cleaning(false, 2, 2));
        assert!(!worth_cleaning(false, 3, 2));
        assert!(!worth_cleaning(false, 15, 2));
        assert!(!worth_cleaning(true, 0, 2));
    }

    #[test]
    fn a_zero_bound_gives_the_index_no_priority() {
        // Every index frame is over the bound: data misses evict index frames first, and an
        // index miss replaces an index frame (falling back to data when there is none).
        assert_eq!(evict_from(Kind::Data, 1, 0), Kind::Index);
        assert_eq!(evict_from(Kind::Data, 0, 0), Kind::Data);
        assert_eq!(evict_from(Kind::Index, 0, 0), Kind::Index);
        assert_eq!(other(Kind::Index), Kind::Data);
        assert_eq!(other(Kind::Data), Kind::Index);
    }
}
