//! What a candidate's text says beyond its match score: who speaks in it, and how much of
//! the query it holds.
//!
//! - **Speaker.** Conversation turns are stored as `Speaker: text`. A question about a
//!   person is nearly always answered by what that person said (97 % of the LoCoMo
//!   development set's questions that name one speaker have evidence spoken by them), but
//!   neither ranking sees it: where each speaker's name is in half the turns BM25 gives it no
//!   weight (FTS5 floors the idf of a word in half the rows near zero); where many
//!   conversations share a store, the name is rare and BM25 favours whatever holds it, the
//!   other person's "Thanks, Caroline!" as much as Caroline's own words; and the sentence model
//!   hears the name as part of the meaning, pulling towards any turn about that person. So a
//!   name the query gives that is a speaker of what its words match ([`speakers_named`]) is
//!   taken out of what is searched for by meaning ([`without_names`]), and a candidate spoken
//!   by someone the query names gains [`SPEAKER`] of the best candidate's relevance
//!   ([`prefer_speakers`]) after the neighbours have had their shares: the speaker's turn
//!   rises, the turn that answers it keeps the share it had.
//! - **Coverage.** BM25 adds up the query's words a memory holds, each by its rarity, so a
//!   rare word twice in a short memory can outrank one holding every word of the query. A
//!   candidate gains [`COVERAGE`] of the best relevance times the share of the query's terms
//!   it holds (Lucene's old `coord` factor; [`cover`]).
//!
//! Both are relative to the best candidate's relevance (to the candidates' spread when none
//! is above zero, as standardised fused scores can be), so they mean the same whatever the
//! relevance's scale (BM25, cosine similarity or fused). They only reorder what matched: the
//! text is read from the candidates at hand, never searched for.

use cairn_store::TextMatch;

use crate::text;

/// What a candidate spoken by someone the query names gains, as a share of the best
/// relevance. Measured after neighbour propagation: 0.2, 0.3, 0.4 and 0.5 (0.4 and 0.5 the
/// same; before propagation 0.2 was best of 0.1 to 0.3).
const SPEAKER: f64 = 0.4;
/// What a candidate holding every query term gains, as a share of the best relevance (0.25,
/// as measured before; 0.1 gained less).
const COVERAGE: f64 = 0.25;
/// Longest speaker prefix taken for a name: `Dr. Mary-Jane O'Neil: …`.
const MAX_SPEAKER_BYTES: usize = 40;

/// `candidates` with the coverage cue added to their relevance, best first. `terms` are the
/// query's terms (`text::query_terms`).
pub(crate) fn cover(terms: &[String], candidates: Vec<TextMatch>) -> Vec<TextMatch> {
    if terms.is_empty() {
        return candidates;
    }
    add(candidates, |content| COVERAGE * held(content, terms))
}

/// `candidates` with the speaker cue added to their relevance, best first: those spoken by
/// someone `query` names gain [`SPEAKER`] of the best relevance.
pub(crate) fn prefer_speakers(query: &str, candidates: Vec<TextMatch>) -> Vec<TextMatch> {
    let query_words: Vec<String> = text::words(query).collect();
    add(candidates, |content| {
        let named = speaker(content).is_some_and(|name| {
            text::words(name).any(|word| {
                word.chars().count() > 1
                    && !text::is_stop_word(&word)
                    && query_words.contains(&word)
            })
        });
        if named { SPEAKER } else { 0.0 }
    })
}

/// Adds `gain(content)` times the candidates' scale to each one's relevance; best first.
fn add(mut candidates: Vec<TextMatch>, gain: impl Fn(&str) -> f64) -> Vec<TextMatch> {
    let best = candidates.iter().map(|hit| hit.relevance).fold(f64::MIN, f64::max);
    let worst = candidates.iter().map(|hit| hit.relevance).fold(f64::MAX, f64::min);
    // Fused scores are standardised and may all be below zero: then the spread is the scale.
    let scale = if best > 0.0 { best } else { best - worst };
    if candidates.is_empty() || scale <= 0.0 {
        return candidates;
    }
    for hit in &mut candidates {
        hit.relevance += scale * gain(&hit.memory.content);
    }
    candidates.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    candidates
}

/// Whether `query` may name someone: it has a capitalised word that is not a stop word
/// ("What", "Did" are).
pub(crate) fn may_name(query: &str) -> bool {
    query_words(query).any(is_name_like)
}

/// The words of `query` (as written, a possessive `'s` taken off) that name a speaker of one
/// of `candidates`, each once.
pub(crate) fn speakers_named(query: &str, candidates: &[TextMatch]) -> Vec<String> {
    let speakers: Vec<String> = candidates
        .iter()
        .filter_map(|hit| speaker(&hit.memory.content))
        .flat_map(text::words)
        .collect();
    let mut named: Vec<String> = Vec::new();
    for word in query_words(query).map(without_possessive) {
        if is_name_like(word)
            && speakers.contains(&word.to_lowercase())
            && !named.iter().any(|name| name == word)
        {
            named.push(word.to_owned());
        }
    }
    named
}

/// `query` without the words `names` (nor their possessive `'s`); the rest as it was.
pub(crate) fn without_names(query: &str, names: &[String]) -> String {
    let mut rest = String::with_capacity(query.len());
    let mut word = String::new();
    for c in query.chars() {
        if is_word_char(c) {
            word.push(c);
            continue;
        }
        if !names.iter().any(|name| name == without_possessive(&word)) {
            rest.push_str(&word);
        }
        word.clear();
        rest.push(c);
    }
    if !names.iter().any(|name| name == without_possessive(&word)) {
        rest.push_str(&word);
    }
    rest
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '\''
}

/// The words of `query` as written, apostrophes kept (`Caroline's`).
fn query_words(query: &str) -> impl Iterator<Item = &str> {
    query.split(|c: char| !is_word_char(c)).filter(|word| !word.is_empty())
}

fn without_possessive(word: &str) -> &str {
    word.strip_suffix("'s").unwrap_or(word)
}

/// A capitalised word of two letters or more that is not a stop word, written as names are:
/// a capital only at its start or after an apostrophe (`O'Brien`). An identifier
/// (`InvoiceLoader`) or an acronym (`API`) is not one, so a coding task that names a type
/// does not wait for the full-text search that looks for speakers before its embedding.
fn is_name_like(word: &str) -> bool {
    let mut letters = word.chars();
    letters.next().is_some_and(char::is_uppercase)
        && word.chars().count() > 1
        && letters
            .scan(true, |after_letter, c| {
                let capital_inside = *after_letter && c.is_uppercase();
                *after_letter = c.is_alphabetic();
                Some(capital_inside)
            })
            .all(|capital_inside| !capital_inside)
        && !text::is_stop_word(&word.to_lowercase())
}

/// The share of `terms` (distinct, lower case, at most 32) that `content` holds as words,
/// without an allocation per word: the words are folded into one buffer in turn.
fn held(content: &str, terms: &[String]) -> f64 {
    let mut found = vec![false; terms.len()];
    let mut word = String::new();
    for raw in content.split(|c: char| !c.is_alphanumeric()).filter(|raw| !raw.is_empty()) {
        word.clear();
        word.extend(raw.chars().flat_map(char::to_lowercase));
        if let Some(index) = terms.iter().position(|term| *term == word) {
            found[index] = true;
        }
    }
    found.iter().filter(|held| **held).count() as f64 / terms.len() as f64
}

/// Who speaks in a memory written as `Speaker: text`: one to three capitalised words before
/// the first `": "`, after a leading `[…]` or `(…)` (a date, say). `None` for anything else
/// ("Note: …" is a speaker too, harmlessly: no query names it).
pub(crate) fn speaker(content: &str) -> Option<&str> {
    let mut rest = content.trim_start();
    for (open, close) in [('[', ']'), ('(', ')')] {
        if rest.starts_with(open)
            && let Some(end) = rest.find(close)
        {
            rest = rest[end + close.len_utf8()..].trim_start();
        }
    }
    let (name, _) = rest.split_once(": ")?;
    let words: Vec<&str> = name.split(' ').collect();
    let is_name_word = |word: &&str| {
        word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().all(|c| c.is_alphabetic() || matches!(c, '.' | '-' | '\''))
    };
    (name.len() <= MAX_SPEAKER_BYTES && words.len() <= 3 && words.iter().all(is_name_word))
        .then_some(name)
}

/// Whether a memory asks rather than tells: its text ends with a question mark, before any
/// trailing bracketed note (`… you play any instruments? [shares a photo: a guitar]`).
pub(crate) fn asks(content: &str) -> bool {
    let mut text = content.trim_end();
    while let Some(close) = text.chars().last().filter(|c| matches!(c, ']' | ')')) {
        let open = if close == ']' { '[' } else { '(' };
        match text.rfind(open) {
            Some(start) => text = text[..start].trim_end(),
            None => break,
        }
    }
    text.ends_with('?')
}

#[cfg(test)]
mod tests {
    use cairn_store::conformance::sample_memory;
    use cairn_types::Scope;

    use super::*;

    fn order(query: &str, candidates: &[(&str, f64)]) -> Vec<String> {
        let candidates = candidates
            .iter()
            .map(|(content, relevance)| TextMatch {
                memory: sample_memory(content, Scope::User, 0),
                relevance: *relevance,
            })
            .collect();
        prefer_speakers(query, cover(&text::query_terms(query), candidates))
            .into_iter()
            .map(|hit| hit.memory.content)
            .collect()
    }

    #[test]
    fn the_turn_of_the_person_asked_about_comes_first() {
        assert_eq!(
            order(
                "What instrument does Melanie play?",
                &[
                    ("Caroline: I play an instrument too, the guitar.", 1.0),
                    ("Melanie: I play the clarinet, an instrument I love.", 0.9),
                ]
            ),
            [
                "Melanie: I play the clarinet, an instrument I love.",
                "Caroline: I play an instrument too, the guitar.",
            ]
        );
        assert_eq!(
            order(
                "What instrument does Dana play?",
                &[
                    ("Caroline: I play an instrument too, the guitar.", 1.0),
                    ("Melanie: I play the clarinet, an instrument I love.", 0.9),
                ]
            ),
            [
                "Caroline: I play an instrument too, the guitar.",
                "Melanie: I play the clarinet, an instrument I love.",
            ],
            "nobody named: the order stands"
        );
    }

    #[test]
    fn a_memory_holding_more_of_the_query_comes_first_in_a_near_tie() {
        assert_eq!(
            order(
                "Where is the red bike kept?",
                &[("The bike, the bike!", 1.0), ("The red bike is kept in the garage.", 0.9),]
            ),
            ["The red bike is kept in the garage.", "The bike, the bike!"]
        );
        assert_eq!(
            order(
                "Where is the red bike kept?",
                &[("The bike, the bike!", 1.0), ("The red bike is kept in the garage.", 0.5),]
            ),
            ["The bike, the bike!", "The red bike is kept in the garage."],
            "a clear lead in relevance stands"
        );
    }

    #[test]
    fn names_of_speakers_are_taken_out_of_what_is_searched_by_meaning() {
        let candidates: Vec<TextMatch> = [
            "Melanie: Thanks, Caroline! Painting is fun.",
            "Caroline: I painted a sunset. [shares a photo: Lake Tahoe]",
        ]
        .iter()
        .map(|content| TextMatch { memory: sample_memory(content, Scope::User, 0), relevance: 1.0 })
        .collect();
        let named = |query| speakers_named(query, &candidates);
        assert_eq!(named("What did Caroline paint?"), ["Caroline"]);
        assert_eq!(named("Did Melanie like Caroline's sunset?"), ["Melanie", "Caroline"]);
        assert!(named("What did Tahoe look like?").is_empty(), "not a speaker: `Tahoe`");
        assert!(named("what did caroline paint?").is_empty(), "a name is capitalised");
        assert_eq!(
            without_names(
                "Did Melanie like Caroline's sunset?",
                &named("Did Melanie like Caroline's sunset?")
            ),
            "Did  like  sunset?"
        );
        assert_eq!(
            without_names("When is Caroline's birthday", &["Caroline".to_owned()]),
            "When is  birthday"
        );
        assert!(may_name("What did Caroline paint?"));
        assert!(!may_name("What did she paint? I wonder"), "stop words and single letters");
        assert!(may_name("Did O'Brien's team ship?"));
        assert!(
            !may_name("fix InvoiceLoader in the API client for CI"),
            "identifiers and acronyms are not names"
        );
    }

    #[tokio::test]
    async fn a_question_about_someone_finds_what_they_said_before_what_mentions_them() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = crate::Engine::new(std::sync::Arc::new(store.unwrap()));
        let contents = [
            "Melanie: Caroline! Caroline, the class photo with Caroline is up.",
            "Deploys go through the release script.",
            "Tabs in makefiles, always.",
            "Caroline: I took a pottery class last week.",
            "Release notes are written on Fridays.",
            "Jon: The dance studio opens in May.",
        ];
        let memories =
            contents.iter().map(|content| crate::testing::memory(content, Scope::User)).collect();
        engine.create_memories(memories, "tester").await.unwrap();
        let query = cairn_types::SearchQuery {
            q: Some("What class did Caroline take?".to_owned()),
            ..cairn_types::SearchQuery::default()
        };
        let hits = engine.search(query).await.unwrap().hits;
        let found: Vec<&str> = hits.iter().map(|hit| hit.memory.content.as_str()).collect();
        assert_eq!(
            found.first(),
            Some(&contents[3]),
            "the name is who speaks, not a word to match three times: {found:?}"
        );
        assert!(found.contains(&contents[0]), "the turn that mentions her still matches");
    }

    #[test]
    fn speakers_are_the_capitalised_names_before_a_colon() {
        assert_eq!(speaker("Caroline: I went to a support group."), Some("Caroline"));
        assert_eq!(speaker("Mary-Jane O'Neil: hello"), Some("Mary-Jane O'Neil"));
        assert_eq!(speaker("[7 May 2023] Caroline: hi"), Some("Caroline"));
        assert_eq!(speaker("the build: fails on macOS"), None);
        assert_eq!(speaker("Use pnpm: npm breaks the lockfile"), None, "not a name: `pnpm`");
        assert_eq!(speaker("Deploys go through the release script."), None);
    }

    #[test]
    fn memories_that_ask_are_told_from_those_that_tell() {
        assert!(asks("Caroline: You play any instruments?"));
        assert!(asks("Mel: Where was this? [shares a photo: a lake at dawn]"));
        assert!(!asks("Mel: I play the clarinet. [shares a photo: a clarinet?]"));
        assert!(!asks("Tabs in makefiles, always."));
    }
}
