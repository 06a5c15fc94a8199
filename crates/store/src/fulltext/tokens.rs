//! The full-text tokenizer: SQLite FTS5's `porter unicode61 remove_diacritics 2`, in Rust, so
//! both backends index the same terms (PostgreSQL's postings, the in-memory index).
//!
//! unicode61: token characters are letters, numbers and private-use characters (a combining
//! mark inside a token belongs to it and is dropped); tokens are folded to lower case with
//! the diacritics of Latin letters removed. Then the Porter stemmer of FTS5.

use super::porter;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Whether unicode61 (categories `L* N* Co`) counts `c` as part of a token.
fn is_token_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    c.is_alphanumeric() || ('\u{E000}'..='\u{F8FF}').contains(&c)
}

/// Whether `c` is one of the Latin letters whose diacritics unicode61 removes.
fn is_latin(c: char) -> bool {
    ('\u{00C0}'..='\u{024F}').contains(&c) || ('\u{1E00}'..='\u{1EFF}').contains(&c)
}

/// Folds one token character: lower case, Latin diacritics removed.
fn fold(c: char, into: &mut String) {
    for lower in c.to_lowercase() {
        if is_latin(lower) {
            into.extend(lower.nfd().filter(|part| !is_combining_mark(*part)));
        } else {
            into.push(lower);
        }
    }
}

/// The terms FTS5 indexes for `text`, in order (duplicates kept).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_token = false;
    for c in text.chars() {
        if is_token_char(c) {
            fold(c, &mut current);
            in_token = true;
        } else if in_token && is_combining_mark(c) {
            // A diacritic inside a token: removed.
        } else if in_token {
            push(&mut tokens, &mut current);
            in_token = false;
        }
    }
    if in_token {
        push(&mut tokens, &mut current);
    }
    tokens
}

fn push(tokens: &mut Vec<String>, current: &mut String) {
    if !current.is_empty() {
        tokens.push(porter::stem(current).into_owned());
    }
    current.clear();
}

/// The terms of a memory: those of its content and of its tags (the JSON text of the list,
/// as SQLite indexes the column), counted per term.
pub struct Document {
    /// `(term, occurrences in content, occurrences in tags)`, sorted by term.
    pub terms: Vec<(String, i32, i32)>,
    /// Tokens of both columns: FTS5's document length.
    pub length: i32,
}

impl Document {
    pub fn of(content: &str, tags: &[String]) -> Document {
        Document::of_text(content, &serde_json::to_string(tags).expect("strings always serialize"))
    }

    /// The document of a content and its tags as stored (the list's JSON text).
    pub fn of_text(content: &str, tags_text: &str) -> Document {
        let mut counts: std::collections::BTreeMap<String, (i32, i32)> = Default::default();
        let content = tokenize(content);
        let tags = tokenize(tags_text);
        let length = (content.len() + tags.len()) as i32;
        for term in content {
            counts.entry(term).or_default().0 += 1;
        }
        for term in tags {
            counts.entry(term).or_default().1 += 1;
        }
        Document {
            terms: counts
                .into_iter()
                .map(|(term, (content, tags))| (term, content, tags))
                .collect(),
            length,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_folded_and_stemmed_as_fts5_does() {
        assert_eq!(tokenize("deploying"), ["deploi"]);
        assert_eq!(tokenize("Café generalizations"), ["cafe", "gener"]);
        assert_eq!(tokenize(r#"["tooling","ci"]"#), ["tool", "ci"]);
        assert_eq!(tokenize("snake_case x-y"), ["snake", "case", "x", "y"]);
        assert_eq!(tokenize("\"quote\" OR (NEAR"), ["quot", "or", "near"]);
        assert!(tokenize("  ,;  ").is_empty());
    }

    /// The tokens of every line of `tests/data/fts5-input.txt` against what SQLite's FTS5
    /// made of it (`tests/data/make-golden.sh`): all lines of ASCII text identical, at least
    /// 99.9 % of all lines.
    #[test]
    fn tokens_match_sqlites_golden_file() {
        let input = include_str!("../../tests/data/fts5-input.txt");
        let golden = include_str!("../../tests/data/fts5-tokens.tsv");
        let expected: Vec<&str> = golden
            .lines()
            .map(|line| line.split_once('\t').map_or("", |(_, tokens)| tokens))
            .collect();
        let lines: Vec<&str> = input.lines().collect();
        assert_eq!(lines.len(), expected.len(), "one golden line per input line");
        let mut mismatches = Vec::new();
        for (line, expected) in lines.iter().zip(&expected) {
            let tokens = tokenize(line).join(" ");
            if tokens != *expected {
                mismatches.push((line, tokens, expected));
            }
        }
        for (line, tokens, expected) in &mismatches {
            eprintln!("{line:?}: ours {tokens:?}, FTS5 {expected:?}");
        }
        let ascii = mismatches.iter().filter(|(line, _, _)| line.is_ascii()).count();
        assert_eq!(ascii, 0, "every line of ASCII text tokenizes as FTS5 does");
        assert!(
            mismatches.len() * 1000 <= lines.len(),
            "{} of {} lines differ",
            mismatches.len(),
            lines.len()
        );
    }

    #[test]
    fn documents_count_terms_per_column() {
        let document = Document::of("deploy the deploys", &["deploy".to_owned()]);
        assert_eq!(document.length, 4);
        assert_eq!(document.terms, vec![("deploi".to_owned(), 2, 1), ("the".to_owned(), 1, 0)]);
    }
}
