//! Token counting with the o200k BPE tokenizer, the one current OpenAI models use.

use std::collections::HashMap;
use std::sync::Mutex;

use cairn_types::{Memory, Scope, Timestamp};

/// Starts loading the tokenizer's tables on a background thread; later calls are free.
pub(crate) fn warm_up() {
    std::thread::spawn(|| {
        tiktoken_rs::o200k_base_singleton();
    });
}

/// Token counts of context-pack entries, by memory and version.
#[derive(Default)]
pub(crate) struct EntryTokens {
    counts: Mutex<HashMap<String, (Version, usize)>>,
}

const MAX_CACHED_ENTRIES: usize = 500_000;

/// What an entry's text depends on: the scope and the content (hashed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    updated_at: Timestamp,
    scope: Scope,
    content: u64,
}

impl Version {
    fn of(memory: &Memory) -> Version {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        memory.content.hash(&mut hasher);
        Version { updated_at: memory.updated_at, scope: memory.scope, content: hasher.finish() }
    }
}

impl EntryTokens {
    pub(crate) fn get(&self, memory: &Memory) -> Option<usize> {
        let counts = self.counts.lock().expect("token cache lock");
        let &(version, count) = counts.get(&memory.id)?;
        (version == Version::of(memory)).then_some(count)
    }

    /// Forgets an erased memory.
    pub(crate) fn remove(&self, id: &str) {
        self.counts.lock().expect("token cache lock").remove(id);
    }

    pub(crate) fn insert(&self, memory: &Memory, count: usize) -> usize {
        let mut counts = self.counts.lock().expect("token cache lock");
        if counts.len() >= MAX_CACHED_ENTRIES {
            counts.clear();
        }
        counts.insert(memory.id.clone(), (Version::of(memory), count));
        count
    }
}

/// The number of o200k tokens in `text`.
pub fn count_tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_real_bpe_tokens() {
        assert_eq!(super::count_tokens(""), 0);
        assert_eq!(super::count_tokens("hello world"), 2);
        assert!(super::count_tokens("antidisestablishmentarianism") > 1);
    }
}
