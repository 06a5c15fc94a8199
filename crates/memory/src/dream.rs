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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

/// A memory as the dream cycle sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    pub content: &'a str,
    /// The repository the memory belongs to; `None` for a memory of no repository, which may
    /// be grouped or conflict with memories of any repository.
    pub repo: Option<&'a str>,
}

// ---------------------------------------------------------------------------------------------
// Near-duplicates.
// ---------------------------------------------------------------------------------------------

/// How many MinHash functions there are at most; the LSH bands share them out.
const MINHASH_FUNCTIONS: usize = 128;
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
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

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
fn lsh_shape(threshold: f64) -> (usize, usize) {
    (1..=MAX_BAND_ROWS)
        .rev()
        .map(|rows| (rows, MINHASH_FUNCTIONS / rows))
        .find(|&(rows, bands)| {
            (1.0 - threshold.powi(rows as i32)).powi(bands as i32) <= MISS_PROBABILITY
        })
        .unwrap_or((1, MINHASH_FUNCTIONS))
}

/// The sorted, distinct shingle hashes of a text: word pairs, or single words for short texts.
fn shingles(text: &str) -> Vec<u64> {
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
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The MinHash signature of a shingle set: for each hash function `a·x + b` over 32 bits (odd
/// `a`, so a bijection of the high halves of the already well-mixed shingle hashes), the least
/// value over the set. 32-bit arithmetic is cheaper than 64-bit and only adds rare chance
/// collisions, which cost at most a candidate pair that the exact check then rejects.
fn minhash(set: &[u64], coefficients: &[(u32, u32)], signature: &mut [u32]) {
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
fn jaccard(a: &[u64], b: &[u64]) -> f64 {
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

// ---------------------------------------------------------------------------------------------
// Conflicts.
// ---------------------------------------------------------------------------------------------

/// The contradictions among `items`, one [`ConflictSet`] per subject and repository, in
/// time near-linear in the number of memories (whatever the number of contradicting pairs).
///
/// Each sentence is read, case-insensitively, for preferences and prohibitions of a subject:
/// "use X", "prefer X", "always use X", "we use X", "X is the package manager", "indent with
/// X", "the default branch is X", "switched from Y to X" prefer X; "never use X", "don't use
/// X", "avoid X", "not X", "instead of X", "X is banned" prohibit it; "X, not Y" does both.
/// Two memories contradict when one prefers what the other prohibits (the subject is that
/// thing), or when they prefer different members of one group of mutually exclusive choices,
/// such as npm and pnpm (the subject is the group's name, e.g. "package manager"). When a pair
/// contradicts in several ways, a group conflict is reported before a direct one, and earlier
/// statements before later ones.
///
/// Deliberately conservative: questions, and clauses holding "if", "when", "unless" and the
/// like, are skipped; "use X or Y" is a choice left open, not a preference; an object is at
/// most three words and compared whole, so "never run `npm publish`" and "use npm scripts" say
/// nothing about choosing npm; ambiguous names ("tabs", "main", "ruff") count as a group's
/// member only in a sentence about the group ("indent", "branch", "format"). A memory that both
/// prefers and prohibits a thing says nothing about it. Circumstances ("in tests", "for
/// publishing") are compared: "never use unwrap in library code" and "use unwrap in tests" do
/// not conflict, nor do "use pnpm" and "use npm for publishing" (a rule and its exception),
/// while an unqualified prohibition ("never use unwrap") holds everywhere; words that only
/// restate a group ("npm for installs") are no circumstance.
///
/// Memories of no repository take part in every repository's sets (they hold everywhere), and
/// form sets of their own among themselves. A contradiction between members of one group is
/// reported once, as the group's set: the direct one between, say, "use npm" and "not npm"
/// is left out when the group's set already holds both memories.
pub(crate) fn conflicts<'a>(items: &[Candidate<'a>]) -> Vec<ConflictSet<'a>> {
    let mut statements: Vec<Statement<'a>> = Vec::new();
    let mut by_term: HashMap<Term, Vec<usize>> = HashMap::new();
    let mut by_group: Vec<Vec<Choice>> = vec![Vec::new(); GROUPS.len()];
    for (item, candidate) in items.iter().enumerate() {
        let mut read = Vec::new();
        read_statements(candidate.content, item, &mut read);
        let mut groups: Vec<Choice> = Vec::new();
        for statement in distinct_statements(read) {
            let id = statements.len();
            if let (Term::Member(group, member), Stance::Prefer) =
                (&statement.term, statement.stance)
            {
                match groups.iter_mut().find(|choice| choice.group == *group) {
                    Some(choice) => choice.members |= 1 << member,
                    None => groups.push(Choice {
                        item,
                        group: *group,
                        members: 1 << member,
                        statement: id,
                    }),
                }
            }
            by_term.entry(statement.term.clone()).or_default().push(id);
            statements.push(statement);
        }
        for choice in groups {
            by_group[choice.group].push(choice);
        }
    }
    let repo = |item: usize| items[item].repo;

    let mut found: Vec<ConflictSet<'a>> = Vec::new();
    for (group, choices) in by_group.iter().enumerate() {
        for (part_repo, part) in parts(choices, |choice| repo(choice.item)) {
            let involved = contradicting_choices(&part, &statements);
            if !involved.iter().any(|choice| repo(choice.item) == part_repo) {
                continue;
            }
            let mut sides: BTreeMap<u32, Vec<&Choice>> = BTreeMap::new();
            for choice in involved {
                sides.entry(choice.members).or_default().push(choice);
            }
            let sides: Vec<Side<'a>> = sides
                .into_iter()
                .map(|(members, choices)| Side {
                    label: member_names(group, members),
                    items: choices.iter().map(|choice| choice.item).collect(),
                    quote: statements[choices[0].statement].sentence,
                })
                .collect();
            found.push(ConflictSet::new(GROUPS[group].name.to_owned(), part_repo, sides));
        }
    }

    let mut terms: Vec<(&Term, &Vec<usize>)> = by_term.iter().collect();
    terms.sort_unstable();
    for (term, ids) in terms {
        let Some(&first) = ids.first() else { continue };
        if ids.iter().all(|&id| statements[id].stance == statements[first].stance) {
            continue;
        }
        for (part_repo, part) in parts(ids, |&id| repo(statements[id].item)) {
            let [prefer, prohibit] = contradicting_stances(&part, &statements);
            if prefer.is_empty()
                || !prefer.iter().chain(&prohibit).any(|&id| repo(statements[id].item) == part_repo)
            {
                continue;
            }
            let items = |ids: &[usize]| ids.iter().map(|&id| statements[id].item).collect();
            let (prefer_items, prohibit_items): (Vec<usize>, Vec<usize>) =
                (items(&prefer), items(&prohibit));
            if let Term::Member(group, _) = term {
                let covered = found.iter().any(|set| {
                    set.subject == GROUPS[*group].name
                        && set.repo == part_repo
                        && prefer_items.iter().chain(&prohibit_items).all(|item| set.holds(*item))
                });
                if covered {
                    continue;
                }
            }
            let name = term.display();
            let sides = vec![
                Side {
                    label: name.to_owned(),
                    items: prefer_items,
                    quote: statements[prefer[0]].sentence,
                },
                Side {
                    label: format!("not {name}"),
                    items: prohibit_items,
                    quote: statements[prohibit[0]].sentence,
                },
            ];
            found.push(ConflictSet::new(name.to_owned(), part_repo, sides));
        }
    }
    found.sort_by(|a, b| a.first_item().cmp(&b.first_item()).then(a.subject.cmp(&b.subject)));
    found
}

/// Memories that contradict each other about one subject in one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConflictSet<'a> {
    /// What they speak of, e.g. "package manager" or "yarn".
    pub subject: String,
    /// The repository; `None` when every memory is of none.
    pub repo: Option<&'a str>,
    /// What each side holds ("pnpm", "npm"; "yarn", "not yarn"), with its memories (indices,
    /// ascending); two sides or more.
    pub sides: Vec<Side<'a>>,
    /// One sentence a person reads.
    pub reason: String,
}

/// One position in a conflict and the memories taking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Side<'a> {
    pub label: String,
    pub items: Vec<usize>,
    /// A sentence of the side's first memory that says it.
    quote: &'a str,
}

impl<'a> ConflictSet<'a> {
    fn new(subject: String, repo: Option<&'a str>, mut sides: Vec<Side<'a>>) -> ConflictSet<'a> {
        for side in &mut sides {
            side.items.sort_unstable();
            side.items.dedup();
        }
        sides.sort_by_key(|side| side.items[0]);
        let place = repo.map(|repo| format!(" in `{repo}`")).unwrap_or_default();
        let reason = if sides.len() == 2 && sides.iter().all(|side| side.items.len() == 1) {
            // Two memories: quote them.
            let quoted = |side: &Side<'_>| {
                let says = match side.label.strip_prefix("not ") {
                    Some(thing) if thing == subject => format!("rules out {thing}"),
                    _ => format!("prefers {}", side.label),
                };
                format!("\"{}\" {says}", brief(side.quote))
            };
            let group = if sides.iter().any(|side| side.label == subject) {
                String::new()
            } else {
                format!(" ({subject})")
            };
            format!("{}; {}{group}{place}", quoted(&sides[0]), quoted(&sides[1]))
        } else {
            let counted = sides
                .iter()
                .map(|side| {
                    let n = side.items.len();
                    format!("{} ({n} {})", side.label, if n == 1 { "memory" } else { "memories" })
                })
                .collect::<Vec<_>>()
                .join(" against ");
            format!("{subject}{place}: {counted}")
        };
        ConflictSet { subject, repo, sides, reason }
    }

    fn first_item(&self) -> usize {
        self.sides.iter().map(|side| side.items[0]).min().unwrap_or(0)
    }

    fn holds(&self, item: usize) -> bool {
        self.sides.iter().any(|side| side.items.binary_search(&item).is_ok())
    }
}

/// Splits `values` by repository: each repository's own with those of no repository, and
/// those of no repository alone; repositories in name order, no repository last.
fn parts<'a, 'v, T>(
    values: &'v [T],
    repo: impl Fn(&T) -> Option<&'a str>,
) -> Vec<(Option<&'a str>, Vec<&'v T>)> {
    let mut by_repo: BTreeMap<Option<&'a str>, Vec<&'v T>> = BTreeMap::new();
    for value in values {
        by_repo.entry(repo(value)).or_default().push(value);
    }
    let everywhere = by_repo.remove(&None).unwrap_or_default();
    let mut parts: Vec<(Option<&'a str>, Vec<&'v T>)> = by_repo
        .into_iter()
        .map(|(repo, mut part)| {
            part.extend(everywhere.iter().copied());
            (repo, part)
        })
        .collect();
    if !everywhere.is_empty() {
        parts.push((None, everywhere));
    }
    parts
}

/// The choices of one group that contradict another in the same circumstances: preferred
/// members entirely different, and qualifiers sharing a word or both empty. Circumstances are
/// joined through shared words (union-find), so the work is linear in the choices and their
/// words, and quadratic only in the number of distinct member sets of a circumstance.
fn contradicting_choices<'c>(part: &[&'c Choice], statements: &[Statement<'_>]) -> Vec<&'c Choice> {
    let qualifier = |choice: &Choice| &statements[choice.statement].qualifier;
    let mut classes = UnionFind::new(part.len());
    let mut by_word: HashMap<&str, usize> = HashMap::new();
    let mut general: Option<usize> = None;
    for (index, choice) in part.iter().enumerate() {
        let words = qualifier(choice);
        if words.is_empty() {
            match general {
                Some(other) => classes.union(index, other),
                None => general = Some(index),
            }
        }
        for word in words {
            match by_word.get(word.as_str()) {
                Some(&other) => classes.union(index, other),
                None => {
                    by_word.insert(word, index);
                }
            }
        }
    }
    let mut masks: HashMap<usize, HashSet<u32>> = HashMap::new();
    for (index, choice) in part.iter().enumerate() {
        masks.entry(classes.find(index)).or_default().insert(choice.members);
    }
    let mut involved = Vec::new();
    for (index, choice) in part.iter().enumerate() {
        if masks[&classes.find(index)].iter().any(|&other| other & choice.members == 0) {
            involved.push(*choice);
        }
    }
    involved
}

/// The statements of one term that contradict one of the other stance in the same
/// circumstances, as `[prefer, prohibit]`: an unqualified prohibition holds everywhere, and
/// otherwise the qualifiers must share a word. Linear in the statements and their words.
fn contradicting_stances(part: &[&usize], statements: &[Statement<'_>]) -> [Vec<usize>; 2] {
    let (prefer, prohibit): (Vec<usize>, Vec<usize>) =
        part.iter().map(|&&id| id).partition(|&id| statements[id].stance == Stance::Prefer);
    if prefer.is_empty() {
        return [Vec::new(), Vec::new()];
    }
    let mut by_word: HashMap<&str, Vec<usize>> = HashMap::new();
    for &id in &prefer {
        for word in &statements[id].qualifier {
            by_word.entry(word).or_default().push(id);
        }
    }
    let mut everywhere = false;
    let mut involved: HashSet<usize> = HashSet::new();
    let mut prohibiting = Vec::new();
    for &id in &prohibit {
        let words = &statements[id].qualifier;
        if words.is_empty() {
            everywhere = true;
            prohibiting.push(id);
            continue;
        }
        let mut shares = false;
        for word in words {
            if let Some(ids) = by_word.get_mut(word.as_str()) {
                shares = true;
                // Each preference is marked once, however many prohibitions share its words.
                involved.extend(ids.drain(..));
            }
        }
        if shares {
            prohibiting.push(id);
        }
    }
    let preferring: Vec<usize> = if everywhere {
        prefer
    } else {
        prefer.into_iter().filter(|id| involved.contains(id)).collect()
    };
    if preferring.is_empty() {
        return [Vec::new(), Vec::new()];
    }
    [preferring, prohibiting]
}

/// The names of the members in `members` (a bit set of `GROUPS[group]`'s), joined.
fn member_names(group: usize, members: u32) -> String {
    let names: Vec<&str> = GROUPS[group]
        .members
        .iter()
        .enumerate()
        .filter(|(member, _)| members & (1 << member) != 0)
        .map(|(_, member)| member.name)
        .collect();
    names.join(" and ")
}

/// Disjoint sets over `0..n`, with path halving.
struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind((0..n).collect())
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        self.0[a.max(b)] = a.min(b);
    }
}

/// A memory's preferences within one group, as a bit set of members.
#[derive(Clone)]
struct Choice {
    item: usize,
    group: usize,
    members: u32,
    /// The memory's first preference in the group, quoted in the reason.
    statement: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Stance {
    Prefer = 0,
    Prohibit = 1,
}

/// What a statement is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Term {
    /// A member of a group of exclusive choices: indices into [`GROUPS`] and its members.
    Member(usize, usize),
    /// Anything else, as written (lower case, at most three words or one code span).
    Phrase(String),
}

impl Term {
    fn display(&self) -> &str {
        match self {
            Term::Member(group, member) => GROUPS[*group].members[*member].name,
            Term::Phrase(phrase) => phrase,
        }
    }
}

/// A preference or prohibition.
struct Statement<'a> {
    /// The memory it was read from.
    item: usize,
    stance: Stance,
    term: Term,
    /// The sentence it was read from, as written.
    sentence: &'a str,
    /// The circumstances it is limited to ("in tests", "for publishing"): the first five
    /// letters of each content word, sorted; empty when it holds everywhere. Words naming the
    /// group of a member ("for installs" of npm) are left out.
    qualifier: Vec<String>,
}

/// A sentence as a person reads it in a reason: white space collapsed, long ones shortened.
fn brief(sentence: &str) -> String {
    const MAX_CHARS: usize = 120;
    let text = sentence.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= MAX_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(MAX_CHARS - 1).collect();
    short.truncate(short.trim_end().len());
    short.push('…');
    short
}

/// The first statement of each term, in reading order, leaving out terms the memory both
/// prefers and prohibits.
fn distinct_statements(read: Vec<Statement<'_>>) -> Vec<Statement<'_>> {
    let mut order: Vec<usize> = (0..read.len()).collect();
    order.sort_by(|&x, &y| read[x].term.cmp(&read[y].term).then(x.cmp(&y)));
    let mut keep = vec![false; read.len()];
    for run in order.chunk_by(|&x, &y| read[x].term == read[y].term) {
        let stance = read[run[0]].stance;
        if run.iter().all(|&x| read[x].stance == stance) {
            keep[run[0]] = true;
        }
    }
    read.into_iter().zip(keep).filter_map(|(statement, keep)| keep.then_some(statement)).collect()
}

// The vocabulary: groups of exclusive choices and the words that signal statements.

/// A group of mutually exclusive choices: preferring two of them is a contradiction.
struct Group {
    name: &'static str,
    members: &'static [Member],
    /// Beginnings of words that make a sentence about this group, so that its ambiguous
    /// member names count.
    context: &'static [&'static str],
}

struct Member {
    name: &'static str,
    /// Names that always mean this member, lower case, words separated by single spaces.
    names: &'static [&'static str],
    /// Names that mean this member only in a sentence about the group ("tabs", "main").
    ambiguous: &'static [&'static str],
}

const fn member(
    name: &'static str,
    names: &'static [&'static str],
    ambiguous: &'static [&'static str],
) -> Member {
    Member { name, names, ambiguous }
}

const PACKAGE_MANAGER: usize = 0;
const JS_TEST_RUNNER: usize = 1;
const PY_TEST_RUNNER: usize = 2;
const FORMATTER: usize = 3;
const PY_FORMATTER: usize = 4;
const INDENTATION: usize = 5;
const QUOTES: usize = 6;
const PY_PACKAGE_MANAGER: usize = 7;
const CONTAINER_TOOL: usize = 8;
const BRANCH: usize = 9;
/// The member "spaces" of [`INDENTATION`].
const SPACES: usize = 1;

static GROUPS: [Group; 10] = [
    Group {
        name: "package manager",
        members: &[
            member("npm", &["npm"], &[]),
            member("pnpm", &["pnpm"], &[]),
            member("yarn", &["yarn", "yarnpkg"], &[]),
            member("bun", &["bun"], &[]),
        ],
        context: &["package", "install", "depend"],
    },
    Group {
        name: "JavaScript test runner",
        members: &[
            member("jest", &["jest"], &[]),
            member("vitest", &["vitest"], &[]),
            member("mocha", &["mocha"], &[]),
            member("ava", &[], &["ava"]),
        ],
        context: &["test", "spec", "javascript", "typescript"],
    },
    Group {
        name: "Python test runner",
        members: &[
            member("pytest", &["pytest", "py.test"], &[]),
            member("unittest", &["unittest"], &[]),
            member("nose", &["nose", "nose2", "nosetests"], &[]),
        ],
        context: &["test"],
    },
    Group {
        name: "formatter",
        members: &[
            member("prettier", &["prettier"], &[]),
            member("biome", &["biome"], &[]),
            member("dprint", &["dprint"], &[]),
        ],
        context: &["format"],
    },
    Group {
        name: "Python formatter",
        members: &[
            member("black", &["black"], &[]),
            member("ruff format", &["ruff format"], &["ruff"]),
            member("yapf", &["yapf"], &[]),
            member("autopep8", &["autopep8"], &[]),
        ],
        context: &["format"],
    },
    Group {
        name: "indentation",
        members: &[
            member("tabs", &["hard tabs", "tab characters", "tab indentation"], &["tabs", "tab"]),
            member("spaces", &["soft tabs", "space indentation"], &["spaces", "space"]),
        ],
        context: &["indent"],
    },
    Group {
        name: "quotes",
        members: &[
            member(
                "single quotes",
                &["single quotes", "single quote", "single quoted", "single quoted strings"],
                &["single"],
            ),
            member(
                "double quotes",
                &["double quotes", "double quote", "double quoted", "double quoted strings"],
                &["double"],
            ),
        ],
        context: &["quot", "string"],
    },
    Group {
        name: "Python package manager",
        members: &[
            member("pip", &["pip", "pip3"], &[]),
            member("poetry", &["poetry"], &[]),
            member("uv", &["uv"], &[]),
            member("pipenv", &["pipenv"], &[]),
            member("conda", &["conda"], &[]),
        ],
        context: &["python", "package", "install", "depend"],
    },
    Group {
        name: "container tool",
        members: &[member("docker", &["docker"], &[]), member("podman", &["podman"], &[])],
        context: &["container"],
    },
    Group {
        name: "branch",
        members: &[
            member("main", &[], &["main"]),
            member("master", &["master branch"], &["master"]),
        ],
        context: &["branch", "trunk"],
    },
];

/// Nouns naming groups, as the last words before "is" or ":" ("the default branch is main")
/// or the first after "is the" ("npm is the package manager").
const GROUP_NOUNS: &[(&str, &[usize])] = &[
    ("package manager", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("dependency manager", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("test runner", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("test framework", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("testing framework", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("formatter", &[FORMATTER, PY_FORMATTER]),
    ("indentation", &[INDENTATION]),
    ("indent style", &[INDENTATION]),
    ("indent", &[INDENTATION]),
    ("quote style", &[QUOTES]),
    ("quotes", &[QUOTES]),
    ("container tool", &[CONTAINER_TOOL]),
    ("container runtime", &[CONTAINER_TOOL]),
    ("container engine", &[CONTAINER_TOOL]),
    ("branch", &[BRANCH]),
    ("trunk", &[BRANCH]),
];

/// Beginnings of words that choose within groups when followed by a linking word ("install
/// with pnpm", "indent with tabs", "branch off main") or preceded by "for" ("tabs for
/// indentation").
const GROUP_VERBS: &[(&str, &[usize])] = &[
    ("install", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("manage", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("test", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("format", &[FORMATTER, PY_FORMATTER]),
    ("indent", &[INDENTATION]),
    ("branch", &[BRANCH]),
    ("container", &[CONTAINER_TOOL]),
    ("image", &[CONTAINER_TOOL]),
];

/// Words linking a group verb to its choice.
const LINKERS: &[&str] =
    &["by", "from", "in", "off", "on", "through", "under", "using", "via", "with"];

/// Adjectives between "is the" and a group noun ("npm is the default package manager").
static NOUN_ADJECTIVES: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "a an approved chosen configured current default main official one only our preferred \
        primary recommended required sole standard the this",
    )
});

/// Words after "is" that prohibit the subject ("yarn is banned").
static PROHIBITED_STATES: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set("banned deprecated disallowed discouraged forbidden obsolete outlawed prohibited")
});

/// Words after "is" that prefer the subject, or with "not" prohibit it ("X is not allowed").
const PREFERRED_STATES: &[&str] =
    &["allowed", "mandatory", "permitted", "preferred", "recommended", "required", "standard"];

/// Words that turn a later preference in their clause into a prohibition.
static NEGATORS: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "avoid avoided avoiding ban banned forbid forbidden never no nobody not prohibit \
        prohibited quit stop stopped stopping without",
    )
});

/// Words after a negator that cancel it ("don't forget to use", "not only").
const CANCELLERS: &[&str] =
    &["afraid", "fail", "forget", "hesitate", "just", "merely", "neglect", "only"];

/// Words that make the rest of their clause a condition, not a statement.
const CONDITIONALS: &[&str] =
    &["after", "before", "if", "once", "unless", "until", "when", "whenever", "whether", "while"];

/// Prepositions that limit a statement to some circumstances ("in tests", "for publishing").
const QUALIFYING: &[&str] =
    &["across", "during", "for", "in", "inside", "on", "outside", "under", "within"];

/// Words of a qualifier that limit nothing ("in this repo", "for everything").
const SCOPE_WORDS: &[&str] = &[
    "code",
    "codebase",
    "everything",
    "file",
    "files",
    "general",
    "monorepo",
    "project",
    "projects",
    "repo",
    "repos",
    "repositories",
    "repository",
    "stuff",
    "things",
];

/// Words that end a clause, as punctuation does.
const CLAUSE_WORDS: &[&str] =
    &["although", "but", "however", "that", "though", "whereas", "which", "who"];

/// Common verbs: after "never" or "not" they start an action ("never run `npm publish`"),
/// not a thing prohibited, and after "and" they end a list of preferred things.
static ACTION_VERBS: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "add break bump call change check commit create delete deploy disable do downgrade edit \
        enable expose force hardcode import leak let log make merge modify print publish push \
        read rebase release remove rename reset run ship skip store touch update upgrade write",
    )
});

/// Words skipped before an object ("use the", "use only").
const OBJECT_STARTERS: &[&str] =
    &["a", "always", "an", "either", "exclusively", "just", "only", "our", "plain", "the"];

/// Words that cannot be part of an object or subject: function words, adverbs, and the words
/// that signal statements.
static BOUNDARY: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "a about above across after again against all allowed also although always am an and any \
        anymore anything anywhere are as at avoid be because been before being below besides \
        between both but by can could did directly do does during each either else even ever \
        every everything everywhere except exclusively for from globally had has have he her here \
        him his how however i if in instead into is it it's its just let's like locally may me \
        might more most must my necessary needed neither never no nor not now of off on once only \
        onto or other our out over per permitted please possible prefer preferred prefers rather \
        really recommended required same shall she should since so some such supported sure than \
        that that's the their them then there there's these they this those though through to \
        today too under unless until up upon us use used uses using versus via vs was we we're \
        were what when whenever where whereas whether which while who why will with within \
        without would yet you your",
    )
});

fn is_boundary(word: &str) -> bool {
    BOUNDARY.contains(word)
}

/// The words of a space-separated list.
fn word_set(words: &'static str) -> HashSet<&'static str> {
    words.split_whitespace().collect()
}

/// A member a name may stand for.
struct Named {
    group: usize,
    member: usize,
    /// Whether the name counts only in a sentence about the group.
    ambiguous: bool,
}

/// Every member name, ambiguous or not, to the members it may stand for.
static NAMES: LazyLock<HashMap<&'static str, Vec<Named>>> = LazyLock::new(|| {
    let mut names: HashMap<&'static str, Vec<Named>> = HashMap::new();
    for (g, group) in GROUPS.iter().enumerate() {
        for (m, member) in group.members.iter().enumerate() {
            for &name in member.names {
                names.entry(name).or_default().push(Named {
                    group: g,
                    member: m,
                    ambiguous: false,
                });
            }
            for &name in member.ambiguous {
                names.entry(name).or_default().push(Named { group: g, member: m, ambiguous: true });
            }
        }
    }
    names
});

fn group_verb(word: &str) -> Option<&'static [usize]> {
    GROUP_VERBS.iter().find(|(stem, _)| word.starts_with(stem)).map(|&(_, groups)| groups)
}

/// Words that start statements, which a negator leaves to them ("never use X").
fn is_statement_verb(word: &str) -> bool {
    matches!(
        word,
        "use" | "uses" | "using" | "prefer" | "prefers" | "preferring" | "switch" | "migrate"
    ) || group_verb(word).is_some()
}

// Reading sentences.

/// The sentences of a text: split at line ends, semicolons, and sentence-ending punctuation
/// followed by white space (not inside backticks), trimmed, list markers removed.
fn sentences<'a>(content: &'a str) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut push = |sentence: &'a str| {
        let sentence = sentence.trim();
        let sentence = ["- ", "* ", "• ", "> "]
            .iter()
            .find_map(|marker| sentence.strip_prefix(marker))
            .map_or(sentence, str::trim_start);
        if !sentence.is_empty() {
            found.push(sentence);
        }
    };
    let mut start = 0;
    let mut in_code = false;
    let mut chars = content.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '`' => in_code = !in_code,
            '\n' => {
                push(&content[start..i]);
                start = i + 1;
                in_code = false;
            }
            ';' if !in_code => {
                push(&content[start..i]);
                start = i + 1;
            }
            '.' | '!' | '?'
                if !in_code && chars.peek().is_none_or(|&(_, next)| next.is_whitespace()) =>
            {
                push(&content[start..i + 1]);
                start = i + 1;
            }
            _ => {}
        }
    }
    push(&content[start..]);
    found
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok<'a> {
    /// A lower-case word; contractions arrive as two words ("don't" as "do", "not").
    Word(Cow<'a, str>),
    /// The text between backticks, as written.
    Code(&'a str),
    /// Punctuation that separates clauses: `,` `:` `(` `)` `[` `]` `-` `—` `–`.
    Break(char),
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '\'' | '’' | '-' | '_' | '.' | '/' | '@' | '+' | '#')
}

fn tokenize(sentence: &str) -> Vec<Tok<'_>> {
    let mut toks = Vec::new();
    let mut i = 0;
    while let Some(c) = sentence[i..].chars().next() {
        if c == '`' {
            let end = sentence[i + 1..].find('`').map_or(sentence.len(), |end| i + 1 + end);
            toks.push(Tok::Code(sentence[i + 1..end].trim()));
            i = (end + 1).min(sentence.len());
        } else if is_word_char(c) {
            let end =
                sentence[i..].find(|c| !is_word_char(c)).map_or(sentence.len(), |end| i + end);
            push_word(&mut toks, &sentence[i..end]);
            i = end;
        } else {
            if matches!(c, ',' | ':' | '(' | ')' | '[' | ']' | '—' | '–') {
                toks.push(Tok::Break(c));
            }
            i += c.len_utf8();
        }
    }
    toks
}

fn push_word<'a>(toks: &mut Vec<Tok<'a>>, raw: &'a str) {
    let word = raw.trim_start_matches(['\'', '’']).trim_end_matches(['.', '\'', '’', '-']);
    if word.is_empty() {
        if raw.contains('-') {
            toks.push(Tok::Break('-'));
        }
        return;
    }
    let word: Cow<'a, str> = if word.chars().any(|c| c.is_uppercase() || c == '’') {
        Cow::Owned(word.to_lowercase().replace('’', "'"))
    } else {
        Cow::Borrowed(word)
    };
    let stem = if let Some(stem) = word.strip_suffix("n't") {
        Some(match stem {
            "won" => "will",
            "ca" => "can",
            "sha" => "shall",
            stem => stem,
        })
    } else {
        match word.as_ref() {
            "cannot" => Some("can"),
            "dont" => Some("do"),
            "doesnt" => Some("does"),
            "didnt" => Some("did"),
            "isnt" => Some("is"),
            "arent" => Some("are"),
            "shouldnt" => Some("should"),
            "mustnt" => Some("must"),
            _ => None,
        }
    };
    match stem {
        Some(stem) => {
            toks.push(Tok::Word(Cow::Owned(stem.to_owned())));
            toks.push(Tok::Word(Cow::Borrowed("not")));
        }
        None => toks.push(Tok::Word(word)),
    }
}

/// An object or subject: a code span, or up to three words (a range of tokens).
#[derive(Debug, Clone)]
enum Object<'a> {
    Code(&'a str),
    Words(usize, usize),
}

/// The statements of memory `item`, in reading order.
fn read_statements<'a>(content: &'a str, item: usize, out: &mut Vec<Statement<'a>>) {
    for sentence in sentences(content) {
        if sentence.ends_with('?') {
            continue;
        }
        let toks = tokenize(sentence);
        Reader { toks: &toks, sentence, item, out: &mut *out }.read();
    }
}

struct Reader<'r, 'a> {
    toks: &'r [Tok<'a>],
    sentence: &'a str,
    item: usize,
    out: &'r mut Vec<Statement<'a>>,
}

impl<'a> Reader<'_, 'a> {
    fn read(&mut self) {
        let toks = self.toks;
        for (i, tok) in toks.iter().enumerate() {
            let word = match tok {
                Tok::Break(':') => {
                    self.noun_colon(i);
                    continue;
                }
                Tok::Word(word) => word.as_ref(),
                _ => continue,
            };
            match word {
                "use" | "uses" | "using" => self.chosen(i, i + 1, false),
                "prefer" | "prefers" | "preferring" => {
                    let start = match (self.word(i + 1), self.word(i + 2)) {
                        (Some("using"), _) => i + 2,
                        (Some("to"), Some("use")) => i + 3,
                        _ => i + 1,
                    };
                    self.chosen(i, start, true);
                }
                "never" | "not" | "avoid" | "ban" => self.refused(i),
                "instead" if self.word(i + 1) == Some("of") => self.replaced_by(i, i + 2),
                "rather" if self.word(i + 1) == Some("than") => self.replaced_by(i, i + 2),
                "switch" | "switched" | "switching" | "migrate" | "migrated" | "migrating"
                | "move" | "moved" | "moving" => self.switched(i),
                "replace" | "replaced" | "replacing" => self.replaced(i),
                "is" | "are" => self.is(i),
                "used" => self.passive(i),
                "for" => self.for_group(i),
                _ => {
                    if let Some(groups) = group_verb(word) {
                        self.group_verb(i, groups);
                    }
                }
            }
        }
    }

    fn word(&self, i: usize) -> Option<&str> {
        match self.toks.get(i) {
            Some(Tok::Word(word)) => Some(word),
            _ => None,
        }
    }

    /// Where the clause holding token `i` starts: after the last break or clause word.
    fn clause_start(&self, i: usize) -> usize {
        (0..i)
            .rev()
            .find(|&k| match &self.toks[k] {
                Tok::Break(_) => true,
                Tok::Word(word) => CLAUSE_WORDS.contains(&word.as_ref()),
                Tok::Code(_) => false,
            })
            .map_or(0, |k| k + 1)
    }

    /// Where the clause holding token `i` ends: at the next break or clause word.
    fn clause_end(&self, i: usize) -> usize {
        (i + 1..self.toks.len())
            .find(|&k| match &self.toks[k] {
                Tok::Break(_) => true,
                Tok::Word(word) => CLAUSE_WORDS.contains(&word.as_ref()),
                Tok::Code(_) => false,
            })
            .unwrap_or(self.toks.len())
    }

    /// Whether a negator before token `i` in its clause turns it around.
    fn negated(&self, i: usize) -> bool {
        (self.clause_start(i)..i).any(|k| {
            self.word(k).is_some_and(|word| NEGATORS.contains(word))
                && !self.word(k + 1).is_some_and(|next| CANCELLERS.contains(&next))
        })
    }

    /// Whether the statement at token `i` is a condition ("if you use yarn", "use yarn when
    /// npm fails") or past ("we used to use npm") rather than a rule.
    fn hedged(&self, i: usize) -> bool {
        (self.clause_start(i)..self.clause_end(i)).any(|k| {
            self.word(k).is_some_and(|word| {
                CONDITIONALS.contains(&word) || (word == "used" && self.word(k + 1) == Some("to"))
            })
        })
    }

    fn stance(&self, i: usize) -> Stance {
        if self.negated(i) { Stance::Prohibit } else { Stance::Prefer }
    }

    /// "use X", "prefer X over Y".
    fn chosen(&mut self, i: usize, start: usize, prefer: bool) {
        if self.hedged(i) {
            return;
        }
        // A tool using another ("pnpm uses npm's registry") is no choice of ours.
        if !prefer && i > 0 && self.word(i - 1).is_some_and(|word| NAMES.contains_key(word)) {
            return;
        }
        let stance = self.stance(i);
        let (objects, end, alternatives) = self.objects(start);
        // "Using npm is banned": the phrase is a subject, and "is" says what of.
        if (stance == Stance::Prefer && alternatives)
            || matches!(self.word(end), Some("is" | "are"))
        {
            return;
        }
        for object in objects {
            self.emit(stance, &object, None, end);
        }
        if prefer && stance == Stance::Prefer && matches!(self.word(end), Some("over" | "to")) {
            let (objects, end, _) = self.objects(end + 1);
            for object in objects {
                self.emit(Stance::Prohibit, &object, None, end);
            }
        }
    }

    /// "never X", "not X", "avoid X", and "X, not Y".
    fn refused(&mut self, i: usize) {
        if self.word(i + 1).is_some_and(|next| CANCELLERS.contains(&next)) || self.hedged(i) {
            return;
        }
        if self.word(i) == Some("not")
            && i > 0
            && matches!(self.toks[i - 1], Tok::Break(',' | '(' | '-' | '—' | '–'))
        {
            self.preferred_before(i - 1);
        }
        let mut start = i + 1;
        while matches!(self.word(start), Some("ever" | "again" | "really" | "to" | "be")) {
            start += 1;
        }
        // A verb that states preferences reads the negation itself ("never use X").
        if self.word(start).is_some_and(is_statement_verb) {
            return;
        }
        let (objects, end, _) = self.objects(start);
        for object in objects {
            self.emit(Stance::Prohibit, &object, None, end);
        }
    }

    /// The "X" of "X, not Y": preferred when it names a group's member or is its clause.
    fn preferred_before(&mut self, end: usize) {
        let Some(object) = self.run_before(end) else { return };
        let start = match object {
            Object::Code(_) => end - 1,
            Object::Words(start, _) => start,
        };
        if self.hedged(start) || self.negated(start) {
            return;
        }
        let Some(term) = self.resolve(&object, None) else { return };
        let whole_clause = self.clause_start(start) == start;
        if whole_clause || matches!(term, Term::Member(..)) {
            self.push(term, Stance::Prefer, end);
        }
    }

    /// "instead of Y", "rather than Y".
    fn replaced_by(&mut self, i: usize, start: usize) {
        if self.hedged(i) {
            return;
        }
        let (objects, end, _) = self.objects(start);
        for object in objects {
            self.emit(Stance::Prohibit, &object, None, end);
        }
    }

    /// "switched from Y to X", "migrate to X".
    fn switched(&mut self, i: usize) {
        if self.hedged(i) {
            return;
        }
        let negated = self.negated(i);
        let mut start = i + 1;
        if self.word(start) == Some("over") {
            start += 1;
        }
        let to = match self.word(start) {
            Some("from") => {
                let (objects, end, _) = self.objects(start + 1);
                if !negated {
                    for object in objects {
                        self.emit(Stance::Prohibit, &object, None, end);
                    }
                }
                if self.word(end) != Some("to") {
                    return;
                }
                end + 1
            }
            Some("to") => start + 1,
            _ => return,
        };
        let stance = if negated { Stance::Prohibit } else { Stance::Prefer };
        let (objects, end, _) = self.objects(to);
        for object in objects {
            self.emit(stance, &object, None, end);
        }
    }

    /// "replaced Y with X".
    fn replaced(&mut self, i: usize) {
        if self.hedged(i) || self.negated(i) {
            return;
        }
        let (objects, end, _) = self.objects(i + 1);
        for object in objects {
            self.emit(Stance::Prohibit, &object, None, end);
        }
        if matches!(self.word(end), Some("with" | "by")) {
            let (objects, end, _) = self.objects(end + 1);
            for object in objects {
                self.emit(Stance::Prefer, &object, None, end);
            }
        }
    }

    /// "X is banned", "X is preferred", "X is the package manager", "the default branch is X".
    fn is(&mut self, i: usize) {
        if self.hedged(i) {
            return;
        }
        let mut next = i + 1;
        let negated = self.word(next) == Some("not");
        if negated {
            next += 1;
        }
        let stance = if negated { Stance::Prohibit } else { Stance::Prefer };
        let subject = self.run_before(i);
        match self.word(next) {
            Some(state) if PROHIBITED_STATES.contains(state) => {
                if let (Some(subject), false) = (subject, negated) {
                    self.emit(Stance::Prohibit, &subject, None, next + 1);
                }
            }
            Some(state) if PREFERRED_STATES.contains(&state) => {
                if let Some(subject) = subject {
                    self.emit(stance, &subject, None, next + 1);
                }
            }
            _ => {
                if let Some((groups, end)) = self.noun_after(next) {
                    if let Some(subject) = subject {
                        self.emit(stance, &subject, Some(groups), end);
                    }
                } else if let Some(groups) = subject.and_then(|s| self.noun_ending(&s)) {
                    let (objects, end, _) = self.objects(next);
                    for object in objects {
                        self.emit(stance, &object, Some(groups), end);
                    }
                }
            }
        }
    }

    /// "yarn should never be used", "jest is no longer used", "pnpm is used for installs".
    fn passive(&mut self, i: usize) {
        let (mut start, mut negated, mut passive) = (i, false, false);
        while let Some(word) = start.checked_sub(1).and_then(|k| self.word(k)) {
            match word {
                "never" | "not" | "no" => negated = true,
                "be" | "is" | "are" | "been" | "was" | "were" => passive = true,
                "should" | "must" | "can" | "will" | "shall" | "may" | "always" | "only"
                | "longer" | "has" | "have" => {}
                _ => break,
            }
            start -= 1;
        }
        if !passive || self.hedged(i) {
            return;
        }
        if let Some(subject) = self.run_before(start) {
            let stance = if negated { Stance::Prohibit } else { Stance::Prefer };
            self.emit(stance, &subject, None, i + 1);
        }
    }

    /// "Package manager: pnpm".
    fn noun_colon(&mut self, i: usize) {
        let Some(groups) = self.run_before(i).and_then(|subject| self.noun_ending(&subject)) else {
            return;
        };
        let (objects, end, _) = self.objects(i + 1);
        for object in objects {
            self.emit(Stance::Prefer, &object, Some(groups), end);
        }
    }

    /// "tabs for indentation", "npm for installs".
    fn for_group(&mut self, i: usize) {
        let Some(groups) = self.word(i + 1).and_then(group_verb) else { return };
        if self.hedged(i) {
            return;
        }
        if let Some(subject) = self.run_before(i) {
            let stance = self.stance(i);
            self.emit(stance, &subject, Some(groups), i);
        }
    }

    /// "indent with tabs", "install dependencies with pnpm", "branch off main".
    fn group_verb(&mut self, i: usize, groups: &'static [usize]) {
        if self.hedged(i) {
            return;
        }
        let mut link = i + 1;
        loop {
            match self.word(link) {
                Some(word) if LINKERS.contains(&word) => break,
                Some(word)
                    if link - i <= 2 && !is_statement_verb(word) && !NEGATORS.contains(word) =>
                {
                    link += 1;
                }
                _ => return,
            }
        }
        let mut start = link + 1;
        if self.word(start) == Some("of") {
            start += 1;
        }
        let stance = self.stance(i);
        let (objects, end, _) = self.objects(start);
        for object in objects {
            self.emit(stance, &object, Some(groups), end);
        }
    }

    /// The groups of a noun starting at token `start`, after articles and adjectives, and
    /// the token after the noun.
    fn noun_after(&self, mut start: usize) -> Option<(&'static [usize], usize)> {
        while self.word(start).is_some_and(|word| NOUN_ADJECTIVES.contains(word)) {
            start += 1;
        }
        GROUP_NOUNS.iter().find_map(|&(noun, groups)| {
            let matches =
                noun.split(' ').enumerate().all(|(k, part)| self.word(start + k) == Some(part));
            matches.then_some((groups, start + noun.split(' ').count()))
        })
    }

    /// The groups of a noun that a subject ends with ("the default branch").
    fn noun_ending(&self, subject: &Object<'_>) -> Option<&'static [usize]> {
        let &Object::Words(start, end) = subject else { return None };
        GROUP_NOUNS.iter().find_map(|&(noun, groups)| {
            let parts = noun.split(' ').count();
            let matches = end - start >= parts
                && noun
                    .split(' ')
                    .enumerate()
                    .all(|(k, part)| self.word(end - parts + k) == Some(part));
            matches.then_some(groups)
        })
    }

    /// The subject just before token `end`: a code span, or up to three words.
    fn run_before(&self, end: usize) -> Option<Object<'a>> {
        if end > 0
            && let Tok::Code(code) = self.toks[end - 1]
        {
            return Some(Object::Code(code));
        }
        let mut start = end;
        while start > 0 && end - start < 3 && self.word(start - 1).is_some_and(|w| !is_boundary(w))
        {
            start -= 1;
        }
        (start < end).then_some(Object::Words(start, end))
    }

    /// One object at token `start`, after articles, and the token after it.
    fn object(&self, mut start: usize) -> Option<(Object<'a>, usize)> {
        while self.word(start).is_some_and(|word| OBJECT_STARTERS.contains(&word)) {
            start += 1;
        }
        match self.toks.get(start)? {
            Tok::Code(code) if !code.is_empty() => Some((Object::Code(code), start + 1)),
            Tok::Word(word) if !is_boundary(word) && !ACTION_VERBS.contains(word.as_ref()) => {
                // An adverb ends the object: "use unwrap freely".
                let mut end = start + 1;
                while end - start < 3
                    && self
                        .word(end)
                        .is_some_and(|word| !is_boundary(word) && !word.ends_with("ly"))
                {
                    end += 1;
                }
                Some((Object::Words(start, end), end))
            }
            _ => None,
        }
    }

    /// A list of objects ("npm, yarn or bun"), where it ends, and whether it offers
    /// alternatives ("or"). A plain comma continues the list only when another separator or
    /// the clause's end follows the next object.
    fn objects(&self, start: usize) -> (Vec<Object<'a>>, usize, bool) {
        let mut objects = Vec::new();
        let (mut next, mut end, mut alternatives, mut after_comma) = (start, start, false, false);
        while let Some((object, after)) = self.object(next) {
            let continues = match self.toks.get(after) {
                None | Some(Tok::Break(',')) => true,
                Some(Tok::Word(word)) => matches!(word.as_ref(), "and" | "or" | "nor"),
                _ => false,
            };
            // After a conjunction, a phrase that starts a statement of its own ("and biome
            // instead of prettier") is not part of the list.
            let starts_statement = self.word(after).is_some_and(|word| {
                matches!(word, "instead" | "rather" | "over" | "is" | "are" | "should" | "must")
            });
            if (after_comma && !continues) || (next > start && starts_statement) {
                break;
            }
            objects.push(object);
            end = after;
            let conjunction = match (self.toks.get(after), self.word(after + 1)) {
                (Some(Tok::Break(',')), Some(word @ ("and" | "or" | "nor"))) => {
                    next = after + 2;
                    Some(word)
                }
                (Some(Tok::Break(',')), _) => {
                    next = after + 1;
                    after_comma = true;
                    continue;
                }
                (Some(Tok::Word(word)), _) if matches!(word.as_ref(), "and" | "or" | "nor") => {
                    next = after + 1;
                    Some(word.as_ref())
                }
                _ => break,
            };
            alternatives |= conjunction == Some("or");
            after_comma = false;
        }
        (objects, end, alternatives)
    }

    /// Records a statement about `object`, which token `after` follows; with `groups`, only
    /// when it names one of their members.
    fn emit(
        &mut self,
        stance: Stance,
        object: &Object<'_>,
        groups: Option<&[usize]>,
        after: usize,
    ) {
        if let Some(term) = self.resolve(object, groups) {
            self.push(term, stance, after);
        }
    }

    fn push(&mut self, term: Term, stance: Stance, after: usize) {
        let mut qualifier = self.qualifier(after);
        // Words naming a member's group restate the subject rather than limit it: "use npm
        // for installs" holds as widely as "use npm".
        if let Term::Member(group, _) = term {
            let verbs = GROUP_VERBS.iter().filter(|(_, groups)| groups.contains(&group));
            let stems: Vec<&str> =
                GROUPS[group].context.iter().copied().chain(verbs.map(|&(stem, _)| stem)).collect();
            qualifier.retain(|word| {
                !stems.iter().any(|stem| stem.starts_with(word.as_str()) || word.starts_with(stem))
            });
        }
        let (item, sentence) = (self.item, self.sentence);
        self.out.push(Statement { item, stance, term, sentence, qualifier });
    }

    /// The circumstances of a statement that token `after` follows: the content words of a
    /// prepositional phrase there ("in tests", "for publishing") or opening the sentence ("In
    /// CI, use npm"), each shortened to five letters.
    fn qualifier(&self, after: usize) -> Vec<String> {
        let mut words = Vec::new();
        self.qualifying_words(after, &mut words);
        let opening = self.toks.iter().position(|tok| matches!(tok, Tok::Break(_)));
        if opening.is_some_and(|end| end < after) {
            self.qualifying_words(0, &mut words);
        }
        words.sort_unstable();
        words.dedup();
        words
    }

    fn qualifying_words(&self, start: usize, words: &mut Vec<String>) {
        if !self.word(start).is_some_and(|word| QUALIFYING.contains(&word)) {
            return;
        }
        for tok in &self.toks[start + 1..self.clause_end(start)] {
            let word = match tok {
                Tok::Word(word) => word.as_ref(),
                Tok::Code(code) => code,
                Tok::Break(_) => break,
            };
            if !is_boundary(word) && !SCOPE_WORDS.contains(&word) {
                words.push(word.chars().take(5).collect::<String>().to_lowercase());
            }
        }
    }

    /// What an object names: a member of a group (of `groups`, when given), or else, without
    /// `groups`, the phrase itself.
    fn resolve(&self, object: &Object<'_>, groups: Option<&[usize]>) -> Option<Term> {
        let phrase = match *object {
            Object::Code(code) => {
                code.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
            }
            Object::Words(start, end) => {
                (start..end).filter_map(|k| self.word(k)).collect::<Vec<_>>().join(" ")
            }
        };
        let name = member_name(&phrase);
        if let Some(found) = NAMES.get(name.as_str()) {
            for named in found {
                let allowed = groups.is_none_or(|groups| groups.contains(&named.group));
                if allowed
                    && (!named.ambiguous
                        || groups.is_some()
                        || self.about(named.group, named.member))
                {
                    return Some(Term::Member(named.group, named.member));
                }
            }
        }
        // "2 spaces", "four-space indentation": a number of spaces is always indentation.
        let mut words = name.split(' ');
        if let (
            Some(count),
            Some("spaces" | "space"),
            None | Some("indentation" | "indent" | "indents"),
        ) = (words.next(), words.next(), words.next())
            && (count.bytes().all(|b| b.is_ascii_digit()) || matches!(count, "two" | "four"))
            && groups.is_none_or(|groups| groups.contains(&INDENTATION))
        {
            return Some(Term::Member(INDENTATION, SPACES));
        }
        (groups.is_none() && phrase.chars().count() >= 2).then_some(Term::Phrase(phrase))
    }

    /// Whether the sentence is about `group`: a context word, or another member's name.
    fn about(&self, group: usize, member: usize) -> bool {
        let words: Vec<&str> = (0..self.toks.len()).filter_map(|k| self.word(k)).collect();
        let context = &GROUPS[group].context;
        words.iter().any(|word| context.iter().any(|stem| word.starts_with(stem)))
            || (0..words.len()).any(|k| {
                let pair = words.get(k + 1).map(|next| format!("{} {next}", words[k]));
                [Some(words[k].to_owned()), pair].into_iter().flatten().any(|name| {
                    NAMES.get(member_name(&name).as_str()).is_some_and(|found| {
                        found.iter().any(|named| named.group == group && named.member != member)
                    })
                })
            })
    }
}

/// A phrase as member names are written: hyphens and underscores as spaces, versions dropped
/// ("pnpm@9", "yarn 4", "ruff-format").
fn member_name(phrase: &str) -> String {
    let mut words: Vec<&str> = phrase
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|word| !word.is_empty())
        .map(|word| word.split('@').next().unwrap_or(word))
        .filter(|word| !word.is_empty())
        .collect();
    let is_version = |word: &str| {
        let digits = word.strip_prefix('v').unwrap_or(word);
        digits.bytes().any(|b| b.is_ascii_digit())
            && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'x')
    };
    if words.len() > 1 && words.last().is_some_and(|word| is_version(word)) {
        words.pop();
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {

    use super::*;

    fn candidates<'a>(texts: &[&'a str]) -> Vec<Candidate<'a>> {
        texts.iter().map(|content| Candidate { content, repo: None }).collect()
    }

    fn in_repos<'a>(texts: &[(&'a str, Option<&'a str>)]) -> Vec<Candidate<'a>> {
        texts.iter().map(|&(content, repo)| Candidate { content, repo }).collect()
    }

    /// A deterministic pseudo-random sequence for generated test data.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
            mix64(self.0)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Made-up words from syllables, all distinct.
    fn vocabulary(size: usize) -> Vec<String> {
        const SYLLABLES: [&str; 16] = [
            "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "pa", "di", "go", "hu", "ze", "fi",
            "ba", "xo",
        ];
        (0..size)
            .map(|mut n| {
                let mut word = String::new();
                for _ in 0..3 {
                    word.push_str(SYLLABLES[n % 16]);
                    n /= 16;
                }
                word
            })
            .collect()
    }

    fn words(n: usize, offset: usize) -> Vec<String> {
        vocabulary(4096).into_iter().skip(offset).take(n).collect()
    }

    fn groups(texts: &[&str], threshold: f64) -> Vec<Vec<usize>> {
        near_duplicate_groups(&candidates(texts), threshold)
    }

    #[test]
    fn word_lists_are_sorted() {
        for list in [LINKERS, CANCELLERS, CONDITIONALS, OBJECT_STARTERS, QUALIFYING, SCOPE_WORDS] {
            assert!(list.windows(2).all(|pair| pair[0] < pair[1]), "{list:?}");
        }
    }

    #[test]
    fn lsh_shape_finds_pairs_at_the_threshold() {
        assert_eq!(lsh_shape(0.8), (4, 32));
        assert_eq!(lsh_shape(0.9), (6, 21));
        assert_eq!(lsh_shape(0.5), (2, 64));
        assert_eq!(lsh_shape(1.0), (16, 8));
        assert_eq!(lsh_shape(0.0), (1, 128));
    }

    #[test]
    fn texts_equal_after_normalising_are_duplicates() {
        let texts = [
            "Use pnpm in this repo.",
            "Something else entirely, about the database schema.",
            "  use PNPM in   this repo!",
            "USE pnpm, in this... repo",
            "!!!",
            "...",
        ];
        assert_eq!(groups(&texts, 0.8), [vec![0, 2, 3], vec![4, 5]]);
        assert_eq!(groups(&texts, 1.0), [vec![0, 2, 3], vec![4, 5]]);
        assert_eq!(groups(&["Don't push.", "dont push"], 1.0), [vec![0, 1]]);
    }

    #[test]
    fn one_word_in_twenty_is_a_near_duplicate_at_point_eight() {
        let base = words(20, 100);
        let mut changed = base.clone();
        changed[10] = "different".to_owned();
        let (base, changed) = (base.join(" "), changed.join(" "));
        // 17 shared word pairs of 21: a similarity of 0.81.
        assert_eq!(groups(&[&base, &changed], 0.8), [vec![0, 1]]);
        assert!(groups(&[&base, &changed], 0.85).is_empty());
        assert_eq!(jaccard(&shingles(&base), &shingles(&changed)), 17.0 / 21.0);
    }

    #[test]
    fn unrelated_texts_are_not_duplicates() {
        let texts = [
            "Use pnpm in this repo.",
            "The billing service retries failed charges three times.",
            "Run the migrations before starting the server locally.",
            "Never force-push to main.",
            "pnpm",
        ];
        assert!(groups(&texts, 0.8).is_empty());
        assert!(groups(&texts, 0.3).is_empty());
    }

    #[test]
    fn short_texts_compare_single_words() {
        assert_eq!(groups(&["use pnpm", "pnpm: use!"], 1.0), [vec![0, 1]]);
        assert!(groups(&["use pnpm here", "use npm here"], 0.6).is_empty());
        assert_eq!(groups(&["use pnpm here", "use pnpm there"], 0.5), [vec![0, 1]]);
    }

    #[test]
    fn different_repositories_are_never_grouped() {
        let text = "Run the integration tests with the sandbox credentials.";
        let items = in_repos(&[(text, Some("api")), (text, Some("web"))]);
        assert!(near_duplicate_groups(&items, 0.8).is_empty());
        let items = in_repos(&[(text, Some("api")), (text, Some("api")), (text, Some("web"))]);
        assert_eq!(near_duplicate_groups(&items, 0.8), [vec![0, 1]]);
        // A memory of no repository joins one repository's group, never two.
        let items = in_repos(&[(text, Some("api")), (text, None), (text, Some("web"))]);
        assert_eq!(near_duplicate_groups(&items, 0.8), [vec![0, 1]]);
        let items = in_repos(&[(text, None), (text, None), (text, Some("web"))]);
        assert_eq!(near_duplicate_groups(&items, 0.8), [vec![0, 1, 2]]);
    }

    #[test]
    fn memories_without_a_repository_join_the_most_similar_group() {
        let base = words(30, 200);
        let mut near = base.clone();
        near[29] = "other".to_owned();
        let mut farther = base.clone();
        farther[15] = "other".to_owned();
        let (base, near, farther) = (base.join(" "), near.join(" "), farther.join(" "));
        let items = in_repos(&[(&farther, Some("web")), (&base, None), (&near, Some("api"))]);
        assert_eq!(near_duplicate_groups(&items, 0.8), [vec![1, 2]]);
    }

    #[test]
    fn grouping_is_transitive() {
        let a = words(30, 300);
        let mut b = a.clone();
        b[10] = "changed".to_owned();
        let mut c = b.clone();
        c[20] = "altered".to_owned();
        let (a, b, c) = (a.join(" "), b.join(" "), c.join(" "));
        assert!(jaccard(&shingles(&a), &shingles(&c)) < 0.8);
        let unrelated = words(30, 1000).join(" ");
        assert_eq!(groups(&[&unrelated, &c, &a, &b], 0.8), [vec![1, 2, 3]]);
    }

    #[test]
    fn minhash_estimates_similarity() {
        // The share of equal signature values estimates the Jaccard similarity.
        let mut random = Random(7);
        let coefficients: Vec<(u32, u32)> = (0..MINHASH_FUNCTIONS)
            .map(|_| (random.next() as u32 | 1, random.next() as u32))
            .collect();
        let a: Vec<u64> = (0..200).map(|_| random.next()).collect();
        let mut b = a[..120].to_vec();
        b.extend((0..80).map(|_| random.next()));
        let (mut a, mut b) = (a, b);
        a.sort_unstable();
        b.sort_unstable();
        let (mut sa, mut sb) = (vec![0_u32; MINHASH_FUNCTIONS], vec![0_u32; MINHASH_FUNCTIONS]);
        minhash(&a, &coefficients, &mut sa);
        minhash(&b, &coefficients, &mut sb);
        let equal = sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64;
        let estimate = equal / MINHASH_FUNCTIONS as f64;
        let exact = jaccard(&a, &b);
        assert!((estimate - exact).abs() < 0.15, "estimate {estimate}, exact {exact}");
    }

    #[test]
    fn twenty_thousand_memories_find_the_planted_duplicates_quickly() {
        let vocabulary = vocabulary(3000);
        let mut random = Random(42);
        let mut texts: Vec<String> = (0..20_000)
            .map(|_| {
                let length = 12 + random.below(19);
                let words: Vec<&str> = (0..length)
                    .map(|_| vocabulary[random.below(vocabulary.len())].as_str())
                    .collect();
                words.join(" ")
            })
            .collect();
        // Every hundredth text gets two near copies at the end: one with its case and
        // punctuation changed, one with a word replaced.
        let mut planted = Vec::new();
        for original in (0..20_000).step_by(100) {
            let text = texts[original].clone();
            let mut words: Vec<String> = text.split(' ').map(str::to_owned).collect();
            let loud = format!("{}!", text.to_uppercase().replacen(' ', ", ", 2));
            let last = words.len() - 1;
            words[last] = "replaced".to_owned();
            texts.push(loud);
            texts.push(words.join(" "));
            planted.push(vec![original, texts.len() - 2, texts.len() - 1]);
        }
        // One repository, with every seventh memory of none: all may group together.
        let items: Vec<Candidate<'_>> = texts
            .iter()
            .enumerate()
            .map(|(i, content)| Candidate { content, repo: (i % 7 != 0).then_some("cairn") })
            .collect();
        let found = near_duplicate_groups(&items, 0.8);
        assert_eq!(found, planted);
    }

    #[test]
    fn a_template_repeated_twenty_thousand_times_is_grouped_quickly() {
        // Texts of one template share many word pairs (Jaccard about 0.5): every pair would be
        // a candidate. The planted near-duplicates (one word changed) are still found.
        let text = |i: usize, last: &str| {
            format!(
                "Use pnpm in this repo and keep the build green before pushing changes to \
                 module{i} owned by team{} with ticket{} reviewed by {last}",
                i % 97,
                i * 7
            )
        };
        let mut texts: Vec<String> = (0..20_000).map(|i| text(i, "alice")).collect();
        let planted: Vec<usize> = (0..20_000).step_by(100).collect();
        for &i in &planted {
            texts.push(text(i, "bob"));
        }
        let items: Vec<Candidate<'_>> =
            texts.iter().map(|content| Candidate { content, repo: None }).collect();
        let found = near_duplicate_groups(&items, 0.8);
        let expected: Vec<Vec<usize>> =
            planted.iter().enumerate().map(|(n, &i)| vec![i, 20_000 + n]).collect();
        assert_eq!(found, expected);
    }

    // Conflicts.

    fn conflict(a: &str, b: &str) -> Option<(String, String)> {
        let found = conflicts(&candidates(&[a, b]));
        assert!(found.len() <= 1, "{found:?}");
        found.into_iter().next().map(|set| {
            let sides: Vec<&[usize]> = set.sides.iter().map(|side| &side.items[..]).collect();
            assert_eq!(sides, [[0], [1]]);
            (set.subject, set.reason)
        })
    }

    fn subject(a: &str, b: &str) -> Option<String> {
        conflict(a, b).map(|(subject, _)| subject)
    }

    #[test]
    fn two_package_managers_conflict() {
        assert_eq!(
            conflict("Use pnpm in this repo.", "Always use npm for installs."),
            Some((
                "package manager".to_owned(),
                "\"Use pnpm in this repo.\" prefers pnpm; \"Always use npm for installs.\" \
                 prefers npm (package manager)"
                    .to_owned()
            ))
        );
        assert_eq!(
            subject("Use pnpm, not npm.", "We use npm here.").as_deref(),
            Some("package manager")
        );
        assert_eq!(
            subject("npm is the package manager.", "Use yarn.").as_deref(),
            Some("package manager")
        );
        assert_eq!(
            subject("The package manager is bun.", "Install dependencies with pnpm.").as_deref(),
            Some("package manager")
        );
        assert_eq!(
            subject("Package manager: pnpm@9", "We use Yarn 4.").as_deref(),
            Some("package manager")
        );
    }

    #[test]
    fn a_preference_and_a_prohibition_of_one_thing_conflict() {
        assert_eq!(
            conflict("Don't use yarn.", "Always use yarn for scripts."),
            Some((
                "yarn".to_owned(),
                "\"Don't use yarn.\" rules out yarn; \"Always use yarn for scripts.\" prefers yarn"
                    .to_owned()
            ))
        );
        assert_eq!(subject("yarn is banned.", "We use yarn.").as_deref(), Some("yarn"));
        assert_eq!(subject("Use lodash for helpers.", "Avoid lodash.").as_deref(), Some("lodash"));
        assert_eq!(
            subject("Do not ever use `eval`.", "Use `eval` to parse it.").as_deref(),
            Some("eval")
        );
        assert_eq!(subject("Don't use npm, yarn or bun.", "We use bun.").as_deref(), Some("bun"));
        assert_eq!(subject("We no longer use jest.", "Use jest.").as_deref(), Some("jest"));
        assert_eq!(subject("Stop using Poetry.", "Prefer poetry.").as_deref(), Some("poetry"));
        assert_eq!(
            subject("Mocks are not allowed.", "Mocks are preferred.").as_deref(),
            Some("mocks")
        );
        assert_eq!(subject("Yarn should never be used.", "Use yarn.").as_deref(), Some("yarn"));
        assert_eq!(subject("Using npm is banned.", "We use npm.").as_deref(), Some("npm"));
        assert_eq!(
            subject("Never use unwrap.", "In tests, use unwrap freely.").as_deref(),
            Some("unwrap")
        );
    }

    #[test]
    fn exclusive_choices_conflict_by_group() {
        let cases = [
            ("Indent with tabs.", "Use spaces for indentation, never tabs.", "indentation"),
            ("Tabs, not spaces.", "Indent with 2 spaces.", "indentation"),
            ("Use single quotes.", "Prefer double quotes for strings.", "quotes"),
            ("The default branch is main.", "The default branch is master.", "branch"),
            ("Default branch: main", "master is the default branch.", "branch"),
            ("Run tests with vitest.", "We use jest.", "JavaScript test runner"),
            ("Use pytest.", "Tests use unittest.", "Python test runner"),
            ("Format with prettier.", "Use biome.", "formatter"),
            ("Format with black.", "Use ruff for formatting.", "Python formatter"),
            ("Use uv.", "Use poetry for dependencies.", "Python package manager"),
            ("Use podman, not docker.", "Build images with Docker.", "container tool"),
            ("We migrated from jest to vitest.", "Use jest.", "JavaScript test runner"),
            ("Don't forget to use pnpm.", "Use npm.", "package manager"),
            ("Use pnpm for installs.", "Use npm for installing packages.", "package manager"),
            ("Tabs for indentation.", "Use spaces for indentation.", "indentation"),
            ("Dependencies are managed with Poetry.", "We use uv.", "Python package manager"),
            ("pnpm should be used for installs.", "Use npm.", "package manager"),
        ];
        for (a, b, expected) in cases {
            assert_eq!(subject(a, b).as_deref(), Some(expected), "{a} / {b}");
        }
        assert_eq!(
            conflict("Indent with tabs.", "Use spaces for indentation, never tabs.").unwrap().1,
            "\"Indent with tabs.\" prefers tabs; \"Use spaces for indentation, never tabs.\" \
             prefers spaces (indentation)"
        );
    }

    #[test]
    fn agreeing_or_unrelated_statements_do_not_conflict() {
        let cases = [
            ("Never run `npm publish` locally.", "Use pnpm."),
            ("Never run `npm publish` locally.", "We use npm here."),
            ("Use pnpm.", "Use pnpm for the monorepo."),
            ("Use pnpm, not npm.", "Never use npm."),
            ("Use pytest.", "Use jest for the frontend."),
            ("Use pip.", "Use npm."),
            ("Never use spaces in file names.", "Indent with spaces."),
            ("If you use yarn, clear its cache first.", "Use pnpm."),
            ("Should we use npm?", "Use pnpm."),
            ("Use pnpm or yarn.", "Use npm."),
            ("We used to use npm.", "Use pnpm."),
            ("pnpm uses npm's registry.", "Use yarn."),
            ("Never push to main.", "The default branch is master."),
            ("Use main.rs as the entry point.", "The default branch is master."),
            ("Use npm scripts for tasks.", "Use pnpm."),
            ("Use `npm ci` in CI.", "Use pnpm."),
            ("Use black text on a white background.", "Use ruff for formatting."),
            ("Use the main branch.", "Never use the master branch."),
            ("Avoid global state.", "Use global variables sparingly."),
            ("Don't use unwrap in library code.", "In tests, use unwrap freely."),
            ("Never use `console.log` in production code.", "Use `console.log` for debugging."),
            ("Use npm for publishing.", "Use pnpm for installs."),
            ("Use spaces for indentation.", "Use tabs for indentation in Makefiles."),
            ("Use yarn if npm fails.", "Use npm."),
        ];
        for (a, b) in cases {
            assert_eq!(conflict(a, b), None, "{a} / {b}");
        }
    }

    #[test]
    fn memories_of_different_repositories_never_conflict() {
        let items = in_repos(&[
            ("Use pnpm.", Some("web")),
            ("Use npm.", Some("api")),
            ("Use yarn.", None),
            ("Use bun.", Some("web")),
        ]);
        let found = conflicts(&items);
        type Sides<'a> = Vec<(&'a str, &'a [usize])>;
        let sets: Vec<(Option<&str>, Sides<'_>)> = found
            .iter()
            .map(|set| {
                let sides = set.sides.iter().map(|side| (side.label.as_str(), &side.items[..]));
                (set.repo, sides.collect())
            })
            .collect();
        assert_eq!(
            sets,
            [
                (Some("web"), vec![("pnpm", &[0][..]), ("yarn", &[2]), ("bun", &[3])]),
                (Some("api"), vec![("npm", &[1][..]), ("yarn", &[2])]),
            ]
        );
        assert_eq!(
            found[1].reason,
            "\"Use npm.\" prefers npm; \"Use yarn.\" prefers yarn (package manager) in `api`"
        );
    }

    #[test]
    fn one_set_per_subject_whatever_the_number_of_memories() {
        let items = candidates(&[
            "Use npm. Never use yarn.",
            "Use yarn, not npm.",
            "Unrelated: the API listens on port 8080.",
            "Use pnpm.",
        ]);
        let found = conflicts(&items);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].reason,
            "package manager: npm (1 memory) against yarn (1 memory) against pnpm (1 memory)"
        );

        let texts: Vec<String> = (0..1_400)
            .map(|i| match i % 2 {
                0 => format!("Use pnpm in this repo. Note {i}."),
                _ => format!("Use npm in this repo. Note {i}."),
            })
            .collect();
        let items: Vec<Candidate<'_>> =
            texts.iter().map(|content| Candidate { content, repo: Some("q") }).collect();
        let found = conflicts(&items);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].reason,
            "package manager in `q`: pnpm (700 memories) against npm (700 memories)"
        );
        assert_eq!(found[0].sides[0].items, (0..1_400).step_by(2).collect::<Vec<_>>());
        assert_eq!(found[0].sides[1].items, (1..1_400).step_by(2).collect::<Vec<_>>());
    }

    #[test]
    fn a_thing_preferred_and_ruled_out_by_many_is_one_set() {
        let texts = ["Never use yarn.", "Use yarn for scripts.", "Avoid yarn.", "We use yarn."];
        let found = conflicts(&candidates(&texts));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].subject, "yarn");
        assert_eq!(found[0].sides[0].items, [0, 2]);
        assert_eq!(found[0].sides[1].items, [1, 3]);
        assert_eq!(found[0].reason, "yarn: not yarn (2 memories) against yarn (2 memories)");
    }

    #[test]
    fn a_memory_that_says_both_says_neither() {
        assert_eq!(conflict("Use npm. Actually, never use npm.", "Use npm."), None);
    }

    #[test]
    fn long_sentences_are_shortened_in_reasons() {
        let long = format!("Use pnpm {}.", "because it is fast ".repeat(20));
        let (_, reason) = conflict(&long, "Use npm.").unwrap();
        assert!(reason.starts_with("\"Use pnpm because it is fast"));
        assert!(reason.contains("…\" prefers pnpm"));
    }

    #[test]
    fn statements_are_read_from_sentences() {
        let read = |text: &str| {
            let mut out = Vec::new();
            read_statements(text, 0, &mut out);
            out.into_iter()
                .map(|statement| format!("{:?} {}", statement.stance, statement.term.display()))
                .collect::<Vec<_>>()
        };
        assert_eq!(read("Use pnpm, not npm."), ["Prefer pnpm", "Prefer pnpm", "Prohibit npm"]);
        assert_eq!(read("Use `pnpm` instead of `npm`."), ["Prefer pnpm", "Prohibit npm"]);
        assert_eq!(read("Prefer vitest over jest."), ["Prefer vitest", "Prohibit jest"]);
        assert_eq!(read("We replaced yarn with pnpm."), ["Prohibit yarn", "Prefer pnpm"]);
        assert_eq!(
            read("- Never use npm, yarn, or bun\n- use pnpm"),
            ["Prohibit npm", "Prohibit yarn", "Prohibit bun", "Prefer pnpm"]
        );
        assert_eq!(read("Avoid yarn, npm is fine."), ["Prohibit yarn"]);
        assert_eq!(
            read("Use vitest instead of jest, and biome instead of prettier."),
            ["Prefer vitest", "Prohibit jest", "Prohibit prettier"]
        );
        assert_eq!(read("Jest is no longer used."), ["Prohibit jest"]);
        assert_eq!(read("Use a 4-space indent."), ["Prefer spaces"]);
        assert!(read("Never run `npm publish` locally.").is_empty());
        assert!(read("When publishing, run the release script.").is_empty());
    }

    #[test]
    fn twenty_thousand_memories_are_checked_quickly() {
        let templates = [
            "Use pnpm in this repo.",
            "Always use npm for installs.",
            "Never run `npm publish` locally.",
            "Indent with tabs; keep lines under 100 characters.",
            "The billing service retries failed charges three times before giving up.",
            "Don't use yarn, it breaks the lockfile.",
            "Run the migrations before starting the server. Use the staging database for tests.",
        ];
        let repos: Vec<String> = (0..2000).map(|r| format!("repo-{r}")).collect();
        let texts: Vec<String> =
            (0..20_000).map(|i| format!("{} Note {i}.", templates[i % templates.len()])).collect();
        let items: Vec<Candidate<'_>> = texts
            .iter()
            .enumerate()
            .map(|(i, content)| Candidate { content, repo: Some(&repos[i % repos.len()]) })
            .collect();
        let found = conflicts(&items);
        // Each repository holds ten memories: i, i + 2000, ...; templates 0 and 1 conflict
        // where a repository holds both, as one set.
        let mut expected = 0;
        for r in 0..2000 {
            let kinds: Vec<usize> = (0..10).map(|k| (r + 2000 * k) % templates.len()).collect();
            expected += usize::from(kinds.contains(&0) && kinds.contains(&1));
        }
        assert_eq!(found.len(), expected);
        for set in &found {
            assert_eq!(set.subject, "package manager");
            let repo = set.repo.unwrap();
            for side in &set.sides {
                let template = if side.label == "pnpm" { 0 } else { 1 };
                for &item in &side.items {
                    assert_eq!(items[item].repo, Some(repo));
                    assert_eq!(item % templates.len(), template);
                }
            }
        }
    }
}
