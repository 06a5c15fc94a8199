//! The dream cycle's pure algorithms: finding near-duplicate memories and memories that
//! contradict each other. The engine reads the memories, calls these, and does all storage.
//!
//! Near-duplicates are found with MinHash signatures of word shingles and locality-sensitive
//! hashing (LSH) bands, so only memories that share a band become candidate pairs; every
//! candidate pair is then checked with its exact Jaccard similarity, so a reported pair is never
//! a false positive. 100,000 memories take a fraction of a second in release builds.
//!
//! Conflicts are found by reading each sentence for preferences ("use pnpm", "npm is the
//! package manager") and prohibitions ("never use npm", "yarn is banned", "pnpm, not npm"),
//! indexing them by subject, and comparing only statements about the same subject, so the work
//! grows with the number of memories and the number of conflicts found, not with their square.

mod conflicts;
mod duplicates;
mod reading;
mod vocabulary;

pub(crate) use conflicts::conflicts;
pub(crate) use duplicates::near_duplicate_groups;

/// A memory as the dream cycle sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    pub content: &'a str,
    /// The repository the memory belongs to; `None` for a memory of no repository, which may
    /// be grouped or conflict with memories of any repository.
    pub repo: Option<&'a str>,
}

#[cfg(test)]
mod tests;
