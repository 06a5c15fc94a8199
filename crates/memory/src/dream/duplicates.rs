//! Near-duplicates: MinHash signatures of word shingles, LSH bands, and grouping by exact
//! Jaccard similarity.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use super::Candidate;

/// How many MinHash functions there are at most; the LSH bands share them out.
pub(super) const MINHASH_FUNCTIONS: usize = 128;
/// The most hash values one LSH band may combine.
const MAX_BAND_ROWS: usize = 16;
/// The largest accepted chance that a pair exactly at the threshold never shares a band.
const MISS_PROBABILITY: f64 = 1e-6;
/// A band's bucket with more texts than this is crowded: its pairs are not all compared.
const CROWDED_BUCKET: usize = 64;
/// How many other bands split a crowded bucket.
const CROWD_SPLITS: usize = 3;
/// In a crowd still crowded after a split, how many next texts each is compared with.
const CROWD_WINDOW: usize = 8;
/// Texts with fewer words than this are shingled by single words rather than word pairs.
const BIGRAM_MIN_WORDS: usize = 4;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Fixed seeds keep every hash, and so every result, the same from run to run.
const UNIGRAM_SEED: u64 = 0x243f_6a88_85a3_08d3;
const BIGRAM_SEED: u64 = 0x1319_8a2e_0370_7344;
const MINHASH_SEED: u64 = 0xa409_3822_299f_31d0;
const BAND_SEED: u64 = 0x082e_fa98_ec4e_6c89;
pub(super) const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Groups of near-duplicate memories (indices into `items`), each group with at least two
/// members, members in ascending index order, groups in ascending order of their first member.
///
/// Two memories are near-duplicates when they belong to the same repository (or either has
/// none) and the Jaccard similarity of their word-shingle sets is at least `threshold` (0..=1);
/// texts equal after case folding, punctuation removal and white-space collapsing are always
/// duplicates. Shingles are word pairs, or single words for texts under four words; words are
/// the white-space separated runs of letters and digits, with punctuation deleted ("don't" is
/// "dont"). Grouping is transitive (union-find), with one restriction: a group never holds
/// memories of two different repositories. A memory of no repository similar to groups of two
/// repositories joins the one it is most similar to, ties going to the lower index.
///
/// Candidate pairs come from MinHash LSH, tuned to the threshold so that a pair at the
/// threshold is missed with a chance under one in a million (for thresholds of 0.11 and
/// more; lower thresholds lose recall and gain candidates); pairs sharing no shingle are never
/// near-duplicates, even at threshold 0. A NaN threshold counts as 1.
pub(crate) fn near_duplicate_groups(items: &[Candidate<'_>], threshold: f64) -> Vec<Vec<usize>> {
    let threshold = if threshold.is_nan() { 1.0 } else { threshold.clamp(0.0, 1.0) };
    let sets: Vec<Vec<u64>> = items.iter().map(|item| shingles(item.content)).collect();

    // Texts with the same shingle set share a key and are compared once; the texts of one key
    // and one repository form a node, a group member from the start.
    let mut key_ids: HashMap<&[u64], usize, Mix> =
        HashMap::with_capacity_and_hasher(items.len(), Mix::default());
    let mut keys: Vec<Key<'_>> = Vec::with_capacity(items.len());
    let mut node_ids: HashMap<(usize, Option<&str>), usize, Mix> =
        HashMap::with_capacity_and_hasher(items.len(), Mix::default());
    let mut nodes = Nodes::default();
    let mut node_of_item = Vec::with_capacity(items.len());
    for (item, set) in items.iter().zip(&sets) {
        let key = *key_ids.entry(set.as_slice()).or_insert_with(|| {
            keys.push(Key { set, nodes: Vec::new() });
            keys.len() - 1
        });
        let node = *node_ids.entry((key, item.repo)).or_insert_with(|| {
            keys[key].nodes.push(nodes.repo.len());
            nodes.push(item.repo)
        });
        node_of_item.push(node);
    }

    // Identical texts of a repository and of none are linked like any similar pair.
    let mut cross = Vec::new();
    for key in &keys {
        nodes.link(&key.nodes, &key.nodes, 1.0, &mut cross);
    }

    let (rows, bands) = lsh_shape(threshold);
    let coefficients: Vec<(u32, u32)> = (0..rows * bands)
        .map(|i| {
            let base = MINHASH_SEED.wrapping_add((i as u64).wrapping_mul(GOLDEN_GAMMA));
            (mix64(base) as u32 | 1, mix64(base ^ GOLDEN_GAMMA) as u32)
        })
        .collect();
    // Empty texts have no shingles to sign; their only duplicates are other empty texts.
    let hashed: Vec<usize> = (0..keys.len()).filter(|&key| !keys[key].set.is_empty()).collect();
    let mut band_hashes = vec![0_u64; hashed.len() * bands];
    let mut signature = vec![0_u32; rows * bands];
    for (slot, &key) in hashed.iter().enumerate() {
        minhash(keys[key].set, &coefficients, &mut signature);
        for (band, values) in signature.chunks_exact(rows).enumerate() {
            band_hashes[slot * bands + band] = band_hash(band, values);
        }
    }

    let mut checked: HashSet<u64, Mix> = HashSet::default();
    let mut compare = |a: u32, b: u32| {
        let (a, b) = (&keys[hashed[a as usize]], &keys[hashed[b as usize]]);
        if !nodes.needs_link(&a.nodes, &b.nodes) {
            return;
        }
        let pair = ((a.nodes[0] as u64) << 32) | b.nodes[0] as u64;
        if !checked.insert(pair) {
            return;
        }
        let similarity = jaccard(a.set, b.set);
        if similarity >= threshold && similarity > 0.0 {
            nodes.link(&a.nodes, &b.nodes, similarity, &mut cross);
        }
    };
    let mut bucket: Vec<(u64, u32)> = Vec::with_capacity(hashed.len());
    let mut crowd: Vec<(u64, u32)> = Vec::new();
    for band in 0..bands {
        bucket.clear();
        bucket
            .extend((0..hashed.len()).map(|slot| (band_hashes[slot * bands + band], slot as u32)));
        bucket.sort_unstable();
        for run in bucket.chunk_by(|a, b| a.0 == b.0) {
            if run.len() <= CROWDED_BUCKET {
                for (position, &(_, a)) in run.iter().enumerate() {
                    for &(_, b) in &run[position + 1..] {
                        compare(a, b);
                    }
                }
                continue;
            }
            // A crowded bucket: many texts alike enough to share this band (one template
            // with different details), most of them no near-duplicates. Comparing every
            // pair is quadratic; near-duplicates share most bands, so split the crowd by
            // each of a few other bands and compare within those, or, in a crowd that is
            // still large, each text with its next neighbours.
            for step in 1..=CROWD_SPLITS.min(bands - 1) {
                let other = (band + step) % bands;
                crowd.clear();
                crowd.extend(
                    run.iter().map(|&(_, slot)| (band_hashes[slot as usize * bands + other], slot)),
                );
                crowd.sort_unstable();
                for part in crowd.chunk_by(|a, b| a.0 == b.0) {
                    let window =
                        if part.len() <= CROWDED_BUCKET { part.len() } else { CROWD_WINDOW };
                    for (position, &(_, a)) in part.iter().enumerate() {
                        for &(_, b) in part[position + 1..].iter().take(window) {
                            compare(a, b);
                        }
                    }
                }
            }
        }
    }

    // Memories of no repository join repository groups last, the most similar pairs first.
    cross.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    for &(_, a, b) in &cross {
        nodes.join(a, b);
    }

    let mut members: Vec<Vec<usize>> = vec![Vec::new(); nodes.repo.len()];
    for (item, &node) in node_of_item.iter().enumerate() {
        let root = nodes.find(node);
        members[root].push(item);
    }
    let mut groups: Vec<Vec<usize>> =
        members.into_iter().filter(|group| group.len() >= 2).collect();
    groups.sort_unstable_by_key(|group| group[0]);
    groups
}

/// The texts sharing one shingle set.
struct Key<'s> {
    set: &'s [u64],
    /// The nodes of the key, one per repository (and one for no repository).
    nodes: Vec<usize>,
}

/// Union-find over nodes, each group knowing its repository.
#[derive(Default)]
struct Nodes<'a> {
    parent: Vec<usize>,
    size: Vec<usize>,
    /// The node's own repository, which never changes.
    repo: Vec<Option<&'a str>>,
    /// At a root, the repository of its group: the one of any member that has one.
    group_repo: Vec<Option<&'a str>>,
}

impl<'a> Nodes<'a> {
    fn push(&mut self, repo: Option<&'a str>) -> usize {
        let node = self.repo.len();
        self.parent.push(node);
        self.size.push(1);
        self.repo.push(repo);
        self.group_repo.push(repo);
        node
    }

    fn find(&mut self, mut node: usize) -> usize {
        while self.parent[node] != node {
            self.parent[node] = self.parent[self.parent[node]];
            node = self.parent[node];
        }
        node
    }

    /// Joins the groups of `a` and `b` unless they hold two different repositories.
    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        let (repo_a, repo_b) = (self.group_repo[a], self.group_repo[b]);
        if a == b || (repo_a.is_some() && repo_b.is_some() && repo_a != repo_b) {
            return;
        }
        let (big, small) = if self.size[a] >= self.size[b] { (a, b) } else { (b, a) };
        self.parent[small] = big;
        self.size[big] += self.size[small];
        self.group_repo[big] = repo_a.or(repo_b);
    }

    /// Whether linking the nodes of two similar keys could change anything, so their
    /// similarity is worth computing.
    fn needs_link(&mut self, a: &[usize], b: &[usize]) -> bool {
        for &x in a {
            for &y in b {
                if self.repo[x].is_some() && self.repo[y].is_some() && self.repo[x] != self.repo[y]
                {
                    continue;
                }
                if self.find(x) != self.find(y) {
                    return true;
                }
            }
        }
        false
    }

    /// Links the nodes of two keys `similarity` apart: nodes of the same repository join at
    /// once, a node of no repository and one of a repository are left in `cross` for later.
    fn link(
        &mut self,
        a: &[usize],
        b: &[usize],
        similarity: f64,
        cross: &mut Vec<(f64, usize, usize)>,
    ) {
        for &x in a {
            for &y in b {
                if x == y {
                    continue;
                }
                if self.repo[x] == self.repo[y] {
                    self.join(x, y);
                } else if self.repo[x].is_none() || self.repo[y].is_none() {
                    cross.push((similarity, x.min(y), x.max(y)));
                }
            }
        }
    }
}

/// Rows per band and bands: the most rows (the fewest spurious candidates) that still find a
/// pair at the threshold with a chance of missing it at most [`MISS_PROBABILITY`].
pub(super) fn lsh_shape(threshold: f64) -> (usize, usize) {
    (1..=MAX_BAND_ROWS)
        .rev()
        .map(|rows| (rows, MINHASH_FUNCTIONS / rows))
        .find(|&(rows, bands)| {
            (1.0 - threshold.powi(rows as i32)).powi(bands as i32) <= MISS_PROBABILITY
        })
        .unwrap_or((1, MINHASH_FUNCTIONS))
}

/// The sorted, distinct shingle hashes of a text: word pairs, or single words for short texts.
pub(super) fn shingles(text: &str) -> Vec<u64> {
    let words = word_hashes(text);
    let mut set: Vec<u64> = if words.len() < BIGRAM_MIN_WORDS {
        words.iter().map(|&word| mix64(word ^ UNIGRAM_SEED)).collect()
    } else {
        words.windows(2).map(|pair| mix64(pair[0] ^ mix64(pair[1] ^ BIGRAM_SEED))).collect()
    };
    set.sort_unstable();
    set.dedup();
    set
}

/// FNV-1a hashes of the words of a text: case folded, punctuation deleted, split at white space.
fn word_hashes(text: &str) -> Vec<u64> {
    fn feed(hash: u64, byte: u8) -> u64 {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    }
    let mut words = Vec::new();
    let mut hash = FNV_OFFSET;
    let mut in_word = false;
    let mut rest = text;
    while let Some(&byte) = rest.as_bytes().first() {
        // ASCII is handled byte by byte; anything else is decoded first.
        let (c, length) = if byte.is_ascii() {
            (char::from(byte), 1)
        } else {
            let c = rest.chars().next().unwrap_or_default();
            (c, c.len_utf8())
        };
        rest = &rest[length..];
        if c.is_ascii_alphanumeric() {
            hash = feed(hash, c.to_ascii_lowercase() as u8);
            in_word = true;
        } else if c.is_alphanumeric() {
            for lower in c.to_lowercase() {
                let mut buffer = [0; 4];
                for &byte in lower.encode_utf8(&mut buffer).as_bytes() {
                    hash = feed(hash, byte);
                }
            }
            in_word = true;
        } else if c.is_whitespace() && in_word {
            words.push(hash);
            hash = FNV_OFFSET;
            in_word = false;
        }
        // Anything else is punctuation, deleted without ending the word.
    }
    if in_word {
        words.push(hash);
    }
    words
}

/// SplitMix64's finaliser: a fast, well-mixing bijection of 64-bit values.
pub(super) fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The MinHash signature of a shingle set: for each hash function `a·x + b` over 32 bits (odd
/// `a`, so a bijection of the high halves of the already well-mixed shingle hashes), the least
/// value over the set. 32-bit arithmetic is cheaper than 64-bit and only adds rare chance
/// collisions, which cost at most a candidate pair that the exact check then rejects.
pub(super) fn minhash(set: &[u64], coefficients: &[(u32, u32)], signature: &mut [u32]) {
    signature.fill(u32::MAX);
    for &shingle in set {
        let shingle = (shingle >> 32) as u32;
        for (slot, &(a, b)) in signature.iter_mut().zip(coefficients) {
            *slot = (*slot).min(shingle.wrapping_mul(a).wrapping_add(b));
        }
    }
}

fn band_hash(band: usize, values: &[u32]) -> u64 {
    values
        .iter()
        .fold(mix64(band as u64 ^ BAND_SEED), |hash, &value| mix64(hash ^ u64::from(value)))
}

/// Exact Jaccard similarity of two sorted, distinct sets.
pub(super) fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut shared) = (0, 0, 0_usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - shared;
    if union == 0 { 1.0 } else { shared as f64 / union as f64 }
}

/// A cheap hasher for keys that are, or are made of, integers; SipHash's protection against
/// chosen collisions is worth nothing here and would slow every lookup down.
#[derive(Default)]
struct MixHasher(u64);

type Mix = BuildHasherDefault<MixHasher>;

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = mix64(self.0 ^ u64::from_le_bytes(word)).wrapping_add(chunk.len() as u64);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = mix64(self.0 ^ value);
    }
}
