//! What a candidate's text says beyond its match score: who speaks in it, and how much of
//! the query it holds.
//!
//! - **Speaker.** Conversation turns are stored as `Speaker: text`. A question about a
//!   person is nearly always answered by what that person said (97 % of the LoCoMo
//!   development set's questions that name one speaker have evidence spoken by them), but
//!   neither ranking sees it: each speaker's name is in half the turns, so BM25 gives it no
//!   weight (FTS5 floors the idf of a word in half the rows near zero), and the sentence model
//!   hears the name once among many words. A candidate whose speaker the query names gains
//!   [`SPEAKER`] of the best candidate's relevance.
//! - **Coverage.** BM25 adds up the query's words a memory holds, each by its rarity, so a
//!   rare word twice in a short memory can outrank one holding every word of the query. A
//!   candidate gains [`COVERAGE`] of the best relevance times the share of the query's terms
//!   it holds (Lucene's old `coord` factor).
//!
//! Both are relative to the best candidate's relevance (to the candidates' spread when none
//! is above zero, as standardised fused scores can be), so they mean the same whatever the
//! relevance's scale (BM25, cosine similarity or fused). They only reorder what matched: the
//! text is read from the candidates at hand, never searched for.

use cairn_store::TextMatch;

use crate::text;

/// What a candidate spoken by someone the query names gains, as a share of the best
/// relevance (0.1, 0.2 and 0.3 measured; 0.2 the coarse middle).
const SPEAKER: f64 = 0.2;
/// What a candidate holding every query term gains, as a share of the best relevance (0.25,
/// as measured before; 0.1 gained less).
const COVERAGE: f64 = 0.25;
/// Longest speaker prefix taken for a name: `Dr. Mary-Jane O'Neil: …`.
const MAX_SPEAKER_BYTES: usize = 40;

/// `candidates` with the speaker and coverage cues added to their relevance, best first.
/// `terms` are the query's terms (`text::query_terms`).
pub(crate) fn reweigh(
    query: &str,
    terms: &[String],
    mut candidates: Vec<TextMatch>,
) -> Vec<TextMatch> {
    let best = candidates.iter().map(|hit| hit.relevance).fold(f64::MIN, f64::max);
    let worst = candidates.iter().map(|hit| hit.relevance).fold(f64::MAX, f64::min);
    // Fused scores are standardised and may all be below zero: then the spread is the scale.
    let scale = if best > 0.0 { best } else { best - worst };
    if candidates.is_empty() || scale <= 0.0 {
        return candidates;
    }
    let query_words: Vec<String> = text::words(query).collect();
    for hit in &mut candidates {
        let content = &hit.memory.content;
        let named = speaker(content).is_some_and(|name| {
            text::words(name).any(|word| {
                word.chars().count() > 1
                    && !text::is_stop_word(&word)
                    && query_words.contains(&word)
            })
        });
        let held = if terms.is_empty() { 0.0 } else { held(content, terms) };
        hit.relevance += scale * (if named { SPEAKER } else { 0.0 } + COVERAGE * held);
    }
    candidates.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    candidates
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
        reweigh(query, &text::query_terms(query), candidates)
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
