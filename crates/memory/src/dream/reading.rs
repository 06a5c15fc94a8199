//! Reading sentences: tokens, and the preferences and prohibitions a sentence states.

use std::borrow::Cow;

use super::conflicts::{Stance, Statement, Term};
use super::vocabulary::{
    ACTION_VERBS, CANCELLERS, CLAUSE_WORDS, CONDITIONALS, GROUP_NOUNS, GROUP_VERBS, GROUPS,
    INDENTATION, LINKERS, NAMES, NEGATORS, NOUN_ADJECTIVES, OBJECT_STARTERS, PREFERRED_STATES,
    PROHIBITED_STATES, QUALIFYING, SCOPE_WORDS, SPACES, group_verb, is_boundary, is_statement_verb,
};

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
pub(super) fn read_statements<'a>(content: &'a str, item: usize, out: &mut Vec<Statement<'a>>) {
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
