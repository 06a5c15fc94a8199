//! [`RowTable`]: row numbers found by keys that live with the rows.

use std::hash::{BuildHasher as _, Hash, RandomState};

use hashbrown::HashTable;

/// Row numbers found by their rows' keys, where the keys live with the rows (a list of ids,
/// the documents): each key is kept once, not again as a map's key (a million row ids took
/// 34 MB as a map's keys, 10 MB here). Every call is given `key_of`, the key of a row.
#[derive(Debug, Default)]
pub struct RowTable {
    table: HashTable<u32>,
    hasher: RandomState,
}

impl RowTable {
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The row whose key is `key`.
    pub fn find<'k, Q>(&self, key: &Q, key_of: impl Fn(u32) -> &'k Q) -> Option<u32>
    where
        Q: Hash + Eq + ?Sized + 'k,
    {
        self.table.find(self.hasher.hash_one(key), |&row| key_of(row) == key).copied()
    }

    /// Adds `row`, whose key (already where `key_of` reads it) no other row has.
    pub fn insert<'k, Q>(&mut self, row: u32, key_of: impl Fn(u32) -> &'k Q)
    where
        Q: Hash + ?Sized + 'k,
    {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(key_of(row));
        self.table.insert_unique(hash, row, |&row| hasher.hash_one(key_of(row)));
    }

    /// Takes out the row whose key is `key`; which row it was.
    pub fn remove<'k, Q>(&mut self, key: &Q, key_of: impl Fn(u32) -> &'k Q) -> Option<u32>
    where
        Q: Hash + Eq + ?Sized + 'k,
    {
        let hash = self.hasher.hash_one(key);
        let entry = self.table.find_entry(hash, |&row| key_of(row) == key).ok()?;
        Some(entry.remove().0)
    }

    /// Says that the row of `key` moved from `from` to `to`.
    pub fn moved<Q: Hash + ?Sized>(&mut self, key: &Q, from: u32, to: u32) {
        if let Some(row) = self.table.find_mut(self.hasher.hash_one(key), |&row| row == from) {
            *row = to;
        }
    }

    /// Gives every row its new number; the keys stay.
    pub fn renumber(&mut self, renumbered: impl Fn(u32) -> u32) {
        for row in self.table.iter_mut() {
            *row = renumbered(*row);
        }
    }

    pub fn clear(&mut self) {
        self.table.clear();
    }

    pub fn shrink_to_fit<'k, Q>(&mut self, key_of: impl Fn(u32) -> &'k Q)
    where
        Q: Hash + ?Sized + 'k,
    {
        let hasher = &self.hasher;
        self.table.shrink_to_fit(|&row| hasher.hash_one(key_of(row)));
    }
}
