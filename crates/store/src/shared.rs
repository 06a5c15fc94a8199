//! What several processes sharing one database need from a store: news of what the others
//! changed ([`ExternalChange`], delivered to a [`ChangeListener`]) and locks that exclude
//! across processes ([`SharedLock`]). A backend used by one process reports nothing and
//! shares no lock; the defaults on the traits say so.

use std::sync::Arc;

/// What other processes sharing the database changed. A backend used by one process never
/// reports anything.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalChange {
    /// A conversation's log grew to `next_offset` (exclusive).
    Appended { conversation_id: String, next_offset: u64 },
    /// Memories were written (created, changed, archived, erased); empty when the writer
    /// did not say which (treat as all).
    Memories { ids: Vec<String> },
    /// Vectors of `model` were stored for these memories.
    Vectors { model: String, ids: Vec<String> },
    /// The news is down (the backend lost its way of hearing about changes), sent about every
    /// 500 ms until it is back: re-read what is cheap to re-read (open event streams).
    Poll,
    /// The news is back after changes may have been missed: re-read everything cached.
    Resync,
}

/// Called with every [`ExternalChange`]; it must not block (poke a watch, wake a task).
pub type ChangeListener = Arc<dyn Fn(&ExternalChange) + Send + Sync>;

/// A lock shared by every process on the store, held until dropped.
pub struct SharedLock {
    /// Releases the lock when dropped.
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

impl SharedLock {
    /// A lock held as long as `guard` lives: dropping the guard releases it.
    pub fn new(guard: impl std::any::Any + Send + Sync) -> SharedLock {
        SharedLock { _guard: Box::new(guard) }
    }
}

impl std::fmt::Debug for SharedLock {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("SharedLock")
    }
}

/// The answer to a try at a shared lock.
#[derive(Debug)]
pub enum LockAttempt {
    /// The store is not shared with other processes: there is nothing to lock.
    Unshared,
    /// The lock is held until the [`SharedLock`] is dropped.
    Held(SharedLock),
    /// Another holder has it.
    Busy,
}
