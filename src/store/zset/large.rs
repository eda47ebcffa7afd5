//! The `skiplist` encoding's storage: entries in a B-tree for order, members in a hash map
//! for O(1) lookup, the member bytes shared by both.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;

use super::{Entry, Score};

/// The key-ordered part and the member index of the `Large` encoding.
#[derive(Clone, Debug, Default)]
pub(super) struct Large {
    pub(super) set: BTreeSet<Entry>,
    pub(super) map: HashMap<Bytes, Score>,
}

impl Large {
    pub(super) fn remove_entries(&mut self, doomed: Vec<Entry>) -> usize {
        let n = doomed.len();
        for e in doomed {
            self.set.remove(&e);
            self.map.remove(&e.1);
        }
        self.maybe_shrink();
        n
    }

    pub(super) fn maybe_shrink(&mut self) {
        if self.map.capacity() > 64 && self.map.capacity() / 4 > self.map.len() {
            self.map.shrink_to_fit();
        }
    }
}
