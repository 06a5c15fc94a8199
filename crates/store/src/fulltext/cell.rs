//! Where a store's [`TextIndex`] stands, shared by the store's clones: both backends keep
//! theirs in an [`IndexCell`] and differ only in how changes reach it.

use std::hash::Hash;
use std::sync::{RwLock, RwLockWriteGuard};

use super::{IndexState, LabelFilter, TextIndex};
use crate::MemoryFilter;

/// The index's state. `N` is what a store notes of a change while the index is built.
#[derive(Debug)]
pub enum Held<K, N> {
    /// Being built; the changes committed meanwhile, taken when the build ends.
    Building(Vec<N>),
    Ready(Box<TextIndex<K>>),
    /// It may have missed changes: the database's own search answers until it is built
    /// again.
    Fallback,
}

#[derive(Debug)]
pub struct IndexCell<K, N> {
    held: RwLock<Held<K, N>>,
}

impl<K: Clone + Eq + Hash, N> IndexCell<K, N> {
    /// A cell whose index is about to be built.
    pub fn building() -> IndexCell<K, N> {
        IndexCell { held: RwLock::new(Held::Building(Vec::new())) }
    }

    /// The state, to change it (a change's writer holds it while it applies the change).
    pub fn lock(&self) -> RwLockWriteGuard<'_, Held<K, N>> {
        self.held.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn state(&self) -> IndexState {
        match *self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner) {
            Held::Building(_) => IndexState::Building,
            Held::Ready(_) => IndexState::Ready,
            Held::Fallback => IndexState::Fallback,
        }
    }

    /// How many live memories the filter admits, from the index's counts by label; `None`
    /// while the index is not ready, or when the filter counts archived memories too (the
    /// index holds live ones only): the database counts then.
    pub fn count(&self, filter: &MemoryFilter) -> Option<u64> {
        if filter.include_archived {
            return None;
        }
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Held::Ready(index) = &*held else { return None };
        Some(index.count(&LabelFilter::from(filter)))
    }

    /// The best `limit` live memories for `words` that `filter` admits, as `(key, score)`;
    /// `None` while the index is not ready (the database's own search answers then).
    pub fn search(
        &self,
        words: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Option<Vec<(K, f64)>> {
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Held::Ready(index) = &*held else { return None };
        Some(index.search(words, &LabelFilter::from(filter), limit as usize))
    }
}
