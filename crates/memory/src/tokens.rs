//! Token counting with the o200k BPE tokenizer, the one current OpenAI models use.
//!
//! Only counts are needed, so only the ranks are kept: `data/o200k_base.ranks` holds every
//! token's bytes in rank order, each after its length in one byte (1.6 MB, written from
//! tiktoken's `o200k_base.tiktoken` as `data/README.md` says), and one map from slices of
//! those static bytes to ranks (about 6 MB) serves every lookup. tiktoken-rs's encoder,
//! decoder and sorted token list held 42 MB of the daemon's memory for the same counts. Text
//! is split by o200k's pattern and each piece merged lowest rank first, as tiktoken does;
//! tests check every token against tiktoken-rs's and the counts of varied texts.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{LazyLock, Mutex};

use cairn_types::{Memory, Scope, Timestamp};
use fancy_regex::Regex;
use rustc_hash::FxBuildHasher;

/// o200k's tokens in rank order, each after its length in one byte.
static RANKS: &[u8] = include_bytes!("../data/o200k_base.ranks");

/// How o200k splits text into the pieces it merges (tiktoken's `O200K_BASE_PAT_STR`).
const PATTERN: &str = concat!(
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"\p{N}{1,3}"#,
    "|",
    r#" ?[^\s\p{L}\p{N}]+[\r\n/]*"#,
    "|",
    r#"\s*[\r\n]+"#,
    "|",
    r#"\s+(?!\S)"#,
    "|",
    r#"\s+"#
);

struct Bpe {
    ranks: HashMap<&'static [u8], u32, FxBuildHasher>,
    pattern: Regex,
}

static BPE: LazyLock<Bpe> = LazyLock::new(|| {
    let mut ranks = HashMap::with_capacity_and_hasher(200_000, FxBuildHasher);
    let mut rest = RANKS;
    while let Some((&length, tail)) = rest.split_first() {
        let (token, tail) = tail.split_at(usize::from(length));
        let rank = u32::try_from(ranks.len()).expect("fewer than 2^32 tokens");
        ranks.insert(token, rank);
        rest = tail;
    }
    Bpe { ranks, pattern: Regex::new(PATTERN).expect("o200k's pattern compiles") }
});

thread_local! {
    /// Each thread's own handle on the pattern: with one shared regex, threads wait for each
    /// other's search caches (tiktoken keeps one a thread for the same reason).
    static THREAD_PATTERN: Regex = BPE.pattern.clone();
}

/// Starts loading the tokenizer's tables on a background thread; later calls are free.
pub(crate) fn warm_up() {
    std::thread::spawn(|| LazyLock::force(&BPE));
}

/// The number of o200k tokens in `text`.
pub fn count_tokens(text: &str) -> usize {
    let bpe = &*BPE;
    THREAD_PATTERN.with(|pattern| {
        let mut count = 0;
        for piece in pattern.find_iter(text) {
            match piece {
                Ok(piece) => count += bpe.piece_tokens(piece.as_str().as_bytes()),
                // Past fancy-regex's backtracking limit (not seen with this pattern): four
                // bytes a token for the whole text rather than a short count.
                Err(_) => return count.max(text.len().div_ceil(4)),
            }
        }
        count
    })
}

impl Bpe {
    fn piece_tokens(&self, piece: &[u8]) -> usize {
        if piece.len() < 2 || self.ranks.contains_key(piece) {
            return piece.len().min(1);
        }
        self.merged_parts(piece)
    }

    /// How many tokens `piece` becomes when the adjacent pair of parts with the lowest rank
    /// (the leftmost of equals) is merged, again and again while some pair is a token:
    /// tiktoken's merge with a heap, which takes O(n log n) however long the piece.
    fn merged_parts(&self, piece: &[u8]) -> usize {
        let rank = |from: usize, to: usize| {
            piece.get(from..to).and_then(|pair| self.ranks.get(pair).copied())
        };
        let length = piece.len();
        // Part `i` starts at byte `i` while it lives: it ends at `end[i]`, the part before it
        // starts at `before[i]`, and `pair[i]` is its merge with the next part, if a token.
        let mut end: Vec<usize> = (1..=length).collect();
        let mut before: Vec<usize> = (0..length).map(|i| i.saturating_sub(1)).collect();
        let mut pair: Vec<Option<u32>> = (0..length).map(|i| rank(i, i + 2)).collect();
        let mut merges: BinaryHeap<Reverse<(u32, usize)>> = pair
            .iter()
            .enumerate()
            .filter_map(|(start, rank)| rank.map(|rank| Reverse((rank, start))))
            .collect();
        let mut parts = length;
        while let Some(Reverse((merged, left))) = merges.pop() {
            if pair[left] != Some(merged) {
                continue; // this part has changed since
            }
            let right = end[left];
            let right_end = end[right];
            end[left] = right_end;
            pair[right] = None;
            parts -= 1;
            if right_end < length {
                before[right_end] = left;
            }
            pair[left] = end.get(right_end).and_then(|&next_end| rank(left, next_end));
            if let Some(rank) = pair[left] {
                merges.push(Reverse((rank, left)));
            }
            if left > 0 {
                let previous = before[left];
                pair[previous] = rank(previous, right_end);
                if let Some(rank) = pair[previous] {
                    merges.push(Reverse((rank, previous)));
                }
            }
        }
        parts
    }
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

#[cfg(test)]
mod tests {
    use super::count_tokens;

    #[test]
    fn counts_real_bpe_tokens() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello world"), 2);
        assert!(count_tokens("antidisestablishmentarianism") > 1);
    }

    #[test]
    fn every_token_is_tiktokens() {
        let tiktoken = tiktoken_rs::o200k_base_singleton();
        let ranks = &super::BPE.ranks;
        assert_eq!(ranks.len(), 199_998);
        for (&bytes, &rank) in ranks {
            assert_eq!(tiktoken.decode_bytes(&[rank]).unwrap(), bytes, "rank {rank}");
        }
    }

    #[test]
    fn counts_are_tiktokens() {
        let tiktoken = tiktoken_rs::o200k_base_singleton();
        let mut texts: Vec<String> =
            ["", "a", " ", "\r\n", "I'm here, they've gone; we'LL see"].map(str::to_owned).into();
        // Pieces of every length, long ones too (the merge's worst case), and odd scripts.
        for repeated in ["a", "ab", "xyz", " ", "\n", "7", "=", "é", "日本語", "🙂", "Zß\u{301}"]
        {
            for times in [1, 2, 3, 50, 99, 100, 101, 1_000, 20_000] {
                texts.push(repeated.repeat(times));
            }
        }
        let noise: String = (0..30_000u32)
            .map(|i| {
                char::from_u32(0x20 + (i.wrapping_mul(2_654_435_761) >> 7) % 0x2F00).unwrap_or('?')
            })
            .collect();
        texts.push(noise);
        // The project's own documents: prose, tables, code and JSON.
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        for entry in std::fs::read_dir(docs).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            texts.extend(text.split("\n\n").map(str::to_owned));
            texts.push(text);
        }
        for text in &texts {
            let expected = tiktoken.encode_ordinary(text).len();
            assert_eq!(
                count_tokens(text),
                expected,
                "{:?}",
                text.chars().take(60).collect::<String>()
            );
        }
    }
}
