//! Conflicts: the statements of each memory indexed by subject, and the sets of memories
//! that contradict each other.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::Candidate;
use super::reading::read_statements;
use super::vocabulary::GROUPS;

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
pub(super) enum Stance {
    Prefer = 0,
    Prohibit = 1,
}

/// What a statement is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Term {
    /// A member of a group of exclusive choices: indices into [`GROUPS`] and its members.
    Member(usize, usize),
    /// Anything else, as written (lower case, at most three words or one code span).
    Phrase(String),
}

impl Term {
    pub(super) fn display(&self) -> &str {
        match self {
            Term::Member(group, member) => GROUPS[*group].members[*member].name,
            Term::Phrase(phrase) => phrase,
        }
    }
}

/// A preference or prohibition.
pub(super) struct Statement<'a> {
    /// The memory it was read from.
    pub(super) item: usize,
    pub(super) stance: Stance,
    pub(super) term: Term,
    /// The sentence it was read from, as written.
    pub(super) sentence: &'a str,
    /// The circumstances it is limited to ("in tests", "for publishing"): the first five
    /// letters of each content word, sorted; empty when it holds everywhere. Words naming the
    /// group of a member ("for installs" of npm) are left out.
    pub(super) qualifier: Vec<String>,
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
