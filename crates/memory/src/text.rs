//! Turning free text into search terms, and normalising tasks and commands for comparison.

/// At most this many terms are searched for, the first ones in the text.
const MAX_TERMS: usize = 32;

/// The distinct lower-case words of `text` worth searching for: no stop words, no single
/// letters, in order of first appearance.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in words(text) {
        if word.chars().count() < 2 || is_stop_word(&word) || terms.contains(&word) {
            continue;
        }
        terms.push(word);
        if terms.len() == MAX_TERMS {
            break;
        }
    }
    terms
}

/// The search terms of a request's text: [`terms`] after rule-based rewriting of how
/// questions are asked, which carries no content: "what kind of", "how many", "how long",
/// "would … likely", "might", a leading "may" ("what kind of pot did Mel make" searches
/// `pot mel make`). Words such as "kind" or "long" are left out only in those constructions; "kind
/// words" keeps them.
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let words: Vec<String> = words(text).collect();
    let mut kept = Vec::with_capacity(words.len());
    for (index, word) in words.iter().enumerate() {
        let previous = index.checked_sub(1).map(|before| words[before].as_str());
        let next = words.get(index + 1).map(String::as_str);
        let asking = match word.as_str() {
            "kind" | "kinds" | "type" | "types" | "sort" | "sorts" => next == Some("of"),
            "many" | "much" | "long" | "often" | "far" => previous == Some("how"),
            "likely" => words[..index].iter().any(|before| MODALS.contains(&before.as_str())),
            "might" | "must" | "shall" => true,
            // "May I …", not the month.
            "may" => index == 0,
            _ => false,
        };
        if !asking {
            kept.push(word.as_str());
        }
    }
    terms(&kept.join(" "))
}

/// Auxiliaries that make a question hypothetical ("would she likely …").
const MODALS: &[&str] = &["would", "could", "might", "may", "will", "should"];

/// The lower-case alphanumeric words of `text`.
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// A task as compared across requests: trimmed, case folded, white space collapsed.
pub(crate) fn task_key(task: &str) -> String {
    task.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// A command as compared across requests: trimmed, white space collapsed, case kept.
pub(crate) fn normalize_command(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// English function words, sorted for binary search.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "during", "each", "for", "from", "had", "has", "have", "having", "he", "her", "here",
    "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more",
    "most", "my", "no", "nor", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
    "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
    "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to",
    "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// Words a question asks with, which say nothing of what it is about ("can you tell me
/// how refunds work", "what details do you have for Ada"): left out when judging whether a
/// text answers it. Sorted.
const ASKING_WORDS: &[&str] = &[
    "anyone",
    "anything",
    "detail",
    "details",
    "get",
    "help",
    "info",
    "information",
    "know",
    "like",
    "need",
    "please",
    "something",
    "tell",
    "thing",
    "things",
    "want",
    "way",
    "work",
    "works",
];

/// How much of a question `text` speaks to: the share of the question's content words (its
/// [`query_terms`], less the words it asks with) that `text` holds, a word matching its
/// plural or singular (`hour` and `hours`). 0 for a question with no content words.
pub fn question_coverage(question: &str, text: &str) -> f64 {
    let asked: Vec<String> = query_terms(question)
        .into_iter()
        .filter(|term| ASKING_WORDS.binary_search(&term.as_str()).is_err())
        .collect();
    if asked.is_empty() {
        return 0.0;
    }
    let held: std::collections::HashSet<String> = words(text).map(|word| singular(&word)).collect();
    let covered = asked.iter().filter(|term| held.contains(&singular(term))).count();
    covered as f64 / asked.len() as f64
}

/// A word without a plural's `s` (`hours` → `hour`, `policies` → `policy`; `bus` stays).
fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("ies").filter(|stem| stem.len() >= 2) {
        return format!("{stem}y");
    }
    match word.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') && !stem.ends_with('u') => {
            stem.to_owned()
        }
        _ => word.to_owned(),
    }
}

/// Words that make a note a rule or a preference: "use pnpm, not npm", "never push to
/// main", "we prefer tabs", "don't" (split as `don` `t`).
const RULE_WORDS: &[&str] = &[
    "always", "never", "use", "must", "should", "prefer", "avoid", "instead", "only", "not", "no",
    "don",
];

/// Whether `text` reads as a standing rule or preference.
pub(crate) fn is_rule(text: &str) -> bool {
    words(text).any(|word| RULE_WORDS.contains(&word.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(ASKING_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn coverage_is_the_share_of_the_questions_content_words_a_text_holds() {
        let hours = "Support hours are 9:00 to 17:00 CET, Monday to Friday.";
        let refunds = "Refund policy: contact support within 30 days for a full refund.";
        assert_eq!(question_coverage("What are your support hours?", hours), 1.0);
        assert_eq!(question_coverage("What are your support hours?", refunds), 0.5);
        assert_eq!(question_coverage("Can you tell me how refunds work?", refunds), 1.0);
        assert_eq!(question_coverage("What is your refund policy?", refunds), 1.0);
        assert_eq!(question_coverage("Do you ship to Canada?", refunds), 0.0);
        let booked = "Demo requested by Ada <ada@example.com>";
        assert_eq!(question_coverage("What details do you have for Ada?", booked), 1.0);
        assert_eq!(question_coverage("hello?", refunds), 0.0);
        assert_eq!(singular("policies"), "policy");
        assert_eq!(singular("bus"), "bus");
        assert_eq!(singular("class"), "class");
    }

    #[test]
    fn terms_drop_stop_words_and_repeats() {
        assert_eq!(
            terms("Fix the flaky test in the SQLite store; fix it!"),
            ["fix", "flaky", "test", "sqlite", "store"]
        );
        assert_eq!(terms("src/store-sqlite/lib.rs"), ["src", "store", "sqlite", "lib", "rs"]);
        assert!(terms("the a of").is_empty());
    }

    #[test]
    fn questions_are_searched_by_their_content_words() {
        assert_eq!(
            query_terms("What kind of pot did Mel and her kids make?"),
            ["pot", "mel", "kids", "make"]
        );
        assert_eq!(
            query_terms("How many times has Caroline's dog run away?"),
            ["times", "caroline", "dog", "run", "away"]
        );
        assert_eq!(query_terms("How long has she played the violin?"), ["played", "violin"]);
        assert_eq!(
            query_terms("Would Melanie likely enjoy a concert?"),
            ["melanie", "enjoy", "concert"]
        );
        assert_eq!(query_terms("Might the build fail on macOS?"), ["build", "fail", "macos"]);
        assert_eq!(query_terms("May I ask what she did in May?"), ["ask", "may"]);
        assert_eq!(
            query_terms("Be kind to new users; the long build is likely flaky"),
            ["kind", "new", "users", "long", "build", "likely", "flaky"],
            "outside the constructions of a question the words count"
        );
    }

    #[test]
    fn tasks_and_commands_normalise() {
        assert_eq!(task_key("  Fix   the Build\n"), "fix the build");
        assert_eq!(normalize_command(" git  push\t-f "), "git push -f");
    }
}
