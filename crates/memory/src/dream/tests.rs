//! Tests of the dream cycle: near-duplicate groups, conflicts, and reading statements.

use super::duplicates::{
    GOLDEN_GAMMA, MINHASH_FUNCTIONS, jaccard, lsh_shape, minhash, mix64, shingles,
};
use super::reading::read_statements;
use super::vocabulary::{
    CANCELLERS, CONDITIONALS, LINKERS, OBJECT_STARTERS, QUALIFYING, SCOPE_WORDS,
};
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
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "pa", "di", "go", "hu", "ze", "fi", "ba",
        "xo",
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
    let coefficients: Vec<(u32, u32)> =
        (0..MINHASH_FUNCTIONS).map(|_| (random.next() as u32 | 1, random.next() as u32)).collect();
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
            let words: Vec<&str> =
                (0..length).map(|_| vocabulary[random.below(vocabulary.len())].as_str()).collect();
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
    assert_eq!(subject("Mocks are not allowed.", "Mocks are preferred.").as_deref(), Some("mocks"));
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
