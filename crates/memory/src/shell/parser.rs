//! The parser proper: quoting, separators and pipes, substitutions, here-documents and
//! functions, read into the commands of an [`Output`].

use std::collections::HashMap;

use super::code::{Code, Reader, code_source};
use super::runners::build;
use super::{Command, Inline, MAX_DEPTH, Redirect, RedirectKind, Word, is_name};

/// What the parsing of one text (and of everything nested in it) produces.
#[derive(Default)]
pub(super) struct Output {
    pub(super) commands: Vec<Command>,
    pipelines: usize,
    pub(super) too_deep: bool,
    pub(super) unbalanced: bool,
}

impl Output {
    pub(super) fn new_pipeline(&mut self) -> usize {
        self.pipelines += 1;
        self.pipelines
    }

    fn downloads_since(&self, start: usize) -> bool {
        self.commands.get(start..).unwrap_or_default().iter().any(Command::is_download)
    }
}

/// Parses `text`, found `depth` levels deep, into `out`.
pub(super) fn parse_text(out: &mut Output, text: &str, depth: usize) {
    if depth > MAX_DEPTH {
        out.too_deep = true;
        read_flat(out, text);
        return;
    }
    let mut parser = Parser::new(text);
    parser.script(out, depth, Until::End, None);
    parser.read_heredocs(out, depth);
    parser.settle(out, depth);
}

/// Reads `text` without quoting or nesting: the fallback past [`MAX_DEPTH`]. Quotes, back
/// quotes and brackets separate words or commands, so every word is still looked at.
pub(super) fn read_flat(out: &mut Output, text: &str) {
    fn take_word(words: &mut Vec<Word>, current: &mut String) {
        let text = std::mem::take(current);
        if !text.is_empty() && text != "$" {
            words.push(Word::literal(text));
        }
    }
    let mut words = Vec::new();
    let mut current = String::new();
    for c in text.chars().chain(['\n']) {
        match c {
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' => {
                take_word(&mut words, &mut current);
                if !words.is_empty() {
                    let place = Place { pipeline: out.new_pipeline(), position: 0, function: None };
                    let words = std::mem::take(&mut words);
                    if let Some(command) = build(out, words, Vec::new(), MAX_DEPTH + 1, &place) {
                        out.commands.push(command);
                    }
                }
            }
            ' ' | '\t' | '\r' | '\'' | '"' | '\\' | '<' | '>' => {
                take_word(&mut words, &mut current)
            }
            _ => current.push(c),
        }
    }
}

/// Where a command stands: its pipeline, its place in it, and the function it belongs to.
pub(super) struct Place<'a> {
    pub(super) pipeline: usize,
    pub(super) position: usize,
    pub(super) function: Option<&'a str>,
}

/// What ends the script being read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    End,
    /// `)`, closing `$(`, `<(`, `>(` or a subshell.
    Paren,
    /// `}` as a command's first word, closing a function body.
    Brace,
}

/// A command being read.
#[derive(Default)]
struct Draft {
    words: Vec<Word>,
    redirects: Vec<Redirect>,
    /// Here-documents (index in `Parser::heredocs`) and the redirection each fills.
    heredocs: Vec<(usize, usize)>,
}

/// A here-document: its delimiter until its body is read, and where the body goes.
struct Heredoc {
    delimiter: String,
    strip_tabs: bool,
    /// The delimiter was not quoted, so substitutions in the body run.
    expands: bool,
    body: Option<Word>,
    /// The command and redirection that receive the body.
    slot: Option<(usize, usize)>,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    heredocs: Vec<Heredoc>,
    next_heredoc: usize,
    /// The commands this parser read, whose standard input it settles at the end.
    own: Vec<usize>,
}

impl Parser {
    fn new(text: &str) -> Parser {
        Parser {
            chars: text.chars().collect(),
            pos: 0,
            heredocs: Vec::new(),
            next_heredoc: 0,
            own: Vec::new(),
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Reads commands until `until` (or the end of the text).
    fn script(&mut self, out: &mut Output, depth: usize, until: Until, function: Option<&str>) {
        let mut draft = Draft::default();
        let mut place = (out.new_pipeline(), 0);
        loop {
            self.skip_blanks();
            let Some(c) = self.peek(0) else {
                if until != Until::End {
                    out.unbalanced = true;
                }
                self.finish(out, &mut draft, depth, place, function);
                return;
            };
            match c {
                '&' if self.peek(1) == Some('>') => {
                    self.redirect(out, &mut draft, None, depth, function);
                }
                '\n' | ';' | '&' | '|' | ')' => {
                    self.pos += 1;
                    let pipe = c == '|' && self.peek(0) != Some('|');
                    let doubled = match c {
                        ';' => matches!(self.peek(0), Some(';' | '&')),
                        '&' => self.peek(0) == Some('&'),
                        '|' => matches!(self.peek(0), Some('|' | '&')),
                        _ => false,
                    };
                    if doubled {
                        self.pos += 1;
                    }
                    self.finish(out, &mut draft, depth, place, function);
                    if c == '\n' {
                        self.read_heredocs(out, depth);
                    }
                    if c == ')' {
                        if until == Until::Paren {
                            return;
                        }
                        out.unbalanced = true;
                    }
                    place = if pipe { (place.0, place.1 + 1) } else { (out.new_pipeline(), 0) };
                }
                '(' => {
                    self.pos += 1;
                    let name = match draft.words.as_slice() {
                        [name] => Some(name.text.clone()),
                        [keyword, name] if keyword.text == "function" => Some(name.text.clone()),
                        _ => None,
                    };
                    match name {
                        Some(name) if self.skip_close_paren() => {
                            draft.words.clear();
                            self.function_body(out, depth, &name);
                        }
                        _ => {
                            if !draft.words.is_empty() {
                                out.unbalanced = true;
                                self.finish(out, &mut draft, depth, place, function);
                                place = (out.new_pipeline(), 0);
                            }
                            self.nested_script(out, depth, Until::Paren, function);
                        }
                    }
                }
                '<' | '>' if self.peek(1) != Some('(') => {
                    self.redirect(out, &mut draft, None, depth, function);
                }
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => {
                    let start = self.pos;
                    let word = self.word(out, depth, function);
                    if self.pos == start {
                        // Nothing this parser reads as a word; skip the character.
                        self.pos += 1;
                        continue;
                    }
                    let descriptor = !word.quoted
                        && !word.text.is_empty()
                        && word.text.chars().all(|c| c.is_ascii_digit());
                    if descriptor
                        && matches!(self.peek(0), Some('<' | '>'))
                        && self.peek(1) != Some('(')
                    {
                        let fd = word.text.parse().ok();
                        self.redirect(out, &mut draft, fd, depth, function);
                        continue;
                    }
                    if !word.quoted
                        && word.text == "}"
                        && draft.words.is_empty()
                        && until == Until::Brace
                    {
                        self.finish(out, &mut draft, depth, place, function);
                        return;
                    }
                    let function_keyword = matches!(draft.words.as_slice(), [keyword, _] if keyword.text == "function");
                    if !word.quoted && word.text == "{" && function_keyword {
                        let name = draft.words.pop().map(|name| name.text).unwrap_or_default();
                        draft.words.clear();
                        self.nested_script(out, depth, Until::Brace, Some(&name));
                        continue;
                    }
                    draft.words.push(word);
                }
            }
        }
    }

    fn skip_blanks(&mut self) {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(' ' | '\t' | '\r'), _) => self.pos += 1,
                (Some('\\'), Some('\n')) => self.pos += 2,
                _ => return,
            }
        }
    }

    /// After `name(`: consumes `)` when it comes next, as in a function definition.
    fn skip_close_paren(&mut self) -> bool {
        let start = self.pos;
        self.skip_blanks();
        if self.peek(0) == Some(')') {
            self.pos += 1;
            return true;
        }
        self.pos = start;
        false
    }

    /// Reads the body of function `name`, after `name()`.
    fn function_body(&mut self, out: &mut Output, depth: usize, name: &str) {
        loop {
            self.skip_blanks();
            if self.peek(0) != Some('\n') {
                break;
            }
            self.pos += 1;
        }
        match self.peek(0) {
            Some('{') => {
                self.pos += 1;
                self.nested_script(out, depth, Until::Brace, Some(name));
            }
            Some('(') => {
                self.pos += 1;
                self.nested_script(out, depth, Until::Paren, Some(name));
            }
            // A body of a single command is read as the next command.
            _ => {}
        }
    }

    /// Reads a script nested one level deeper, or, past [`MAX_DEPTH`], skips to its end and
    /// reads it word by word.
    fn nested_script(
        &mut self,
        out: &mut Output,
        depth: usize,
        until: Until,
        function: Option<&str>,
    ) {
        if depth >= MAX_DEPTH {
            out.too_deep = true;
            let (open, close) = if until == Until::Brace { ('{', '}') } else { ('(', ')') };
            let inner = self.skip_balanced(out, open, close);
            read_flat(out, &inner);
        } else {
            self.script(out, depth + 1, until, function);
        }
    }

    /// Skips to the `close` bracket that ends the text being read, without nesting, and
    /// returns what it skipped.
    fn skip_balanced(&mut self, out: &mut Output, open: char, close: char) -> String {
        let mut inner = String::new();
        let mut level = 1usize;
        let mut single_quoted = false;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if single_quoted {
                single_quoted = c != '\'';
            } else if c == '\'' {
                single_quoted = true;
            } else if c == '\\' {
                inner.push(c);
                if let Some(next) = self.peek(0) {
                    self.pos += 1;
                    inner.push(next);
                }
                continue;
            } else if c == open {
                level += 1;
            } else if c == close {
                level -= 1;
                if level == 0 {
                    return inner;
                }
            }
            inner.push(c);
        }
        out.unbalanced = true;
        inner
    }

    /// Reads one word, with its quotes, escapes and substitutions.
    fn word(&mut self, out: &mut Output, depth: usize, function: Option<&str>) -> Word {
        let mut word = Word::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | ')' => break,
                '(' if word.assignment && word.text.ends_with('=') => {
                    // An array assignment: `names=(a b c)`.
                    let raw = self.raw_balanced('(', ')');
                    word.text.push_str(&raw);
                }
                '(' => break,
                '<' | '>' if word.text.is_empty() && !word.quoted && self.peek(1) == Some('(') => {
                    self.pos += 2;
                    let opener = if c == '<' { "<(" } else { ">(" };
                    self.substitution(out, &mut word, depth, function, opener);
                }
                '<' | '>' => break,
                '\'' => {
                    self.pos += 1;
                    word.quoted = true;
                    self.single_quoted(out, &mut word);
                }
                '"' => {
                    self.pos += 1;
                    word.quoted = true;
                    self.double_quoted(out, &mut word, depth, function, true);
                }
                '\\' => {
                    self.pos += 1;
                    word.quoted = true;
                    if let Some(next) = self.peek(0) {
                        self.pos += 1;
                        if next != '\n' {
                            word.text.push(next);
                        }
                    }
                }
                '`' => {
                    self.pos += 1;
                    self.backticks(out, &mut word, depth);
                }
                '$' => self.dollar(out, &mut word, depth, function, false),
                '=' => {
                    if !word.quoted && !word.assignment && is_name(&word.text) {
                        word.assignment = true;
                    }
                    word.text.push(c);
                    self.pos += 1;
                }
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        word
    }

    fn single_quoted(&mut self, out: &mut Output, word: &mut Word) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if c == '\'' {
                return;
            }
            word.text.push(c);
        }
        out.unbalanced = true;
    }

    /// Reads the inside of double quotes up to the closing quote, or, for a here-document's
    /// body (`closed_by_quote` false), to the end of the text.
    fn double_quoted(
        &mut self,
        out: &mut Output,
        word: &mut Word,
        depth: usize,
        function: Option<&str>,
        closed_by_quote: bool,
    ) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' if closed_by_quote => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some(next @ ('$' | '`' | '"' | '\\')) => {
                            self.pos += 1;
                            word.text.push(next);
                        }
                        Some('\n') => self.pos += 1,
                        _ => word.text.push('\\'),
                    }
                }
                '`' => {
                    self.pos += 1;
                    self.backticks(out, word, depth);
                }
                '$' => self.dollar(out, word, depth, function, true),
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        if closed_by_quote {
            out.unbalanced = true;
        }
    }

    /// Reads what starts with `$`: a substitution, arithmetic, a parameter or a `$'…'` string.
    fn dollar(
        &mut self,
        out: &mut Output,
        word: &mut Word,
        depth: usize,
        function: Option<&str>,
        in_double_quotes: bool,
    ) {
        match (self.peek(1), self.peek(2)) {
            (Some('('), Some('(')) => {
                self.pos += 1;
                let raw = self.raw_balanced('(', ')');
                word.text.push('$');
                word.text.push_str(&raw);
            }
            (Some('('), _) => {
                self.pos += 2;
                self.substitution(out, word, depth, function, "$(");
            }
            (Some('{'), _) => {
                self.pos += 1;
                let raw = self.raw_balanced('{', '}');
                word.text.push('$');
                word.text.push_str(&raw);
            }
            (Some('\''), _) if !in_double_quotes => {
                self.pos += 2;
                word.quoted = true;
                self.ansi_c_quoted(out, word);
            }
            // `$"…"`: a translated string, read as double quotes.
            (Some('"'), _) if !in_double_quotes => self.pos += 1,
            _ => {
                word.text.push('$');
                self.pos += 1;
            }
        }
    }

    /// Copies text from the `open` bracket here to the one that closes it, as written.
    fn raw_balanced(&mut self, open: char, close: char) -> String {
        let mut raw = String::new();
        let mut level = 0usize;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            raw.push(c);
            if c == open {
                level += 1;
            } else if c == close {
                level = level.saturating_sub(1);
                if level == 0 {
                    break;
                }
            }
        }
        raw
    }

    /// Reads `$'…'`, with its backslash escapes.
    fn ansi_c_quoted(&mut self, out: &mut Output, word: &mut Word) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '\'' => return,
                '\\' => {
                    let Some(escaped) = self.peek(0) else { break };
                    self.pos += 1;
                    match escaped {
                        'n' => word.text.push('\n'),
                        't' => word.text.push('\t'),
                        'r' => word.text.push('\r'),
                        'x' => {
                            let digits: String = self
                                .chars
                                .iter()
                                .skip(self.pos)
                                .take(2)
                                .take_while(|c| c.is_ascii_hexdigit())
                                .collect();
                            self.pos += digits.len();
                            let code =
                                u32::from_str_radix(&digits, 16).ok().and_then(char::from_u32);
                            word.text.push(code.unwrap_or('x'));
                        }
                        _ => word.text.push(escaped),
                    }
                }
                _ => word.text.push(c),
            }
        }
        out.unbalanced = true;
    }

    /// Reads a `$(…)`, `<(…)` or `>(…)` whose opener was just consumed: its commands join the
    /// output, and the word keeps its text as written.
    fn substitution(
        &mut self,
        out: &mut Output,
        word: &mut Word,
        depth: usize,
        function: Option<&str>,
        opener: &str,
    ) {
        let first_command = out.commands.len();
        let start = self.pos;
        self.nested_script(out, depth, Until::Paren, function);
        word.text.push_str(opener);
        word.text.extend(self.chars.get(start..self.pos).unwrap_or_default());
        word.substitutes = true;
        word.downloads |= out.downloads_since(first_command);
    }

    /// Reads a back-quoted substitution whose opening back quote was just consumed.
    fn backticks(&mut self, out: &mut Output, word: &mut Word, depth: usize) {
        let mut inner = String::new();
        let mut closed = false;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '`' => {
                    closed = true;
                    break;
                }
                '\\' => match self.peek(0) {
                    Some(next @ ('`' | '\\' | '$' | '"')) => {
                        self.pos += 1;
                        inner.push(next);
                    }
                    _ => inner.push('\\'),
                },
                _ => inner.push(c),
            }
        }
        if !closed {
            out.unbalanced = true;
        }
        let first_command = out.commands.len();
        parse_text(out, &inner, depth + 1);
        word.text.push('`');
        word.text.push_str(&inner);
        word.text.push('`');
        word.substitutes = true;
        word.downloads |= out.downloads_since(first_command);
    }

    /// Reads a redirection operator and its target into `draft`.
    fn redirect(
        &mut self,
        out: &mut Output,
        draft: &mut Draft,
        fd: Option<u32>,
        depth: usize,
        function: Option<&str>,
    ) {
        use RedirectKind::{Duplicate, HereDoc, HereString, Read, Write};
        let (kind, length) = match (self.peek(0), self.peek(1), self.peek(2)) {
            (Some('<'), Some('<'), Some('<')) => (HereString, 3),
            (Some('<'), Some('<'), Some('-')) => (HereDoc, 3),
            (Some('<'), Some('<'), _) => (HereDoc, 2),
            (Some('<'), Some('&'), _) => (Duplicate, 2),
            (Some('<'), Some('>'), _) => (Write, 2),
            (Some('<'), _, _) => (Read, 1),
            (Some('>'), Some('>' | '|'), _) => (Write, 2),
            (Some('>'), Some('&'), _) => (Duplicate, 2),
            (Some('&'), Some('>'), Some('>')) => (Write, 3),
            (Some('&'), Some('>'), _) => (Write, 2),
            _ => (Write, 1),
        };
        self.pos += length;
        self.skip_blanks();
        let target = self.word(out, depth, function);
        if target.text.is_empty() && !target.quoted {
            out.unbalanced = true;
        }
        let kind = match kind {
            Duplicate
                if !(target.text == "-" || target.text.chars().all(|c| c.is_ascii_digit())) =>
            {
                Write
            }
            kind => kind,
        };
        if kind == HereDoc {
            self.heredocs.push(Heredoc {
                delimiter: target.text.clone(),
                strip_tabs: length == 3,
                expands: !target.quoted,
                body: None,
                slot: None,
            });
            draft.heredocs.push((self.heredocs.len() - 1, draft.redirects.len()));
            draft.redirects.push(Redirect { kind, fd, target: Word::default() });
        } else {
            draft.redirects.push(Redirect { kind, fd, target });
        }
    }

    /// Turns the draft into a command, if it holds one.
    fn finish(
        &mut self,
        out: &mut Output,
        draft: &mut Draft,
        depth: usize,
        (pipeline, position): (usize, usize),
        function: Option<&str>,
    ) {
        let Draft { words, redirects, heredocs } = std::mem::take(draft);
        let place = Place { pipeline, position, function };
        let Some(command) = build(out, words, redirects, depth, &place) else { return };
        out.commands.push(command);
        let index = out.commands.len() - 1;
        self.own.push(index);
        for (heredoc, redirect) in heredocs {
            if let Some(pending) = self.heredocs.get_mut(heredoc) {
                pending.slot = Some((index, redirect));
            }
            self.deliver(out, heredoc);
        }
    }

    /// Reads the bodies of the here-documents waiting for one, from the start of a line.
    fn read_heredocs(&mut self, out: &mut Output, depth: usize) {
        while self.next_heredoc < self.heredocs.len() {
            let id = self.next_heredoc;
            self.next_heredoc += 1;
            let Some(heredoc) = self.heredocs.get(id) else { break };
            let (delimiter, strip_tabs, expands) =
                (heredoc.delimiter.clone(), heredoc.strip_tabs, heredoc.expands);
            let mut body = String::new();
            let mut closed = false;
            while self.pos < self.chars.len() {
                let rest = self.chars.get(self.pos..).unwrap_or_default();
                let length = rest.iter().position(|&c| c == '\n').unwrap_or(rest.len());
                let line: String = rest.iter().take(length).collect();
                self.pos = (self.pos + length + 1).min(self.chars.len());
                let line = if strip_tabs { line.trim_start_matches('\t') } else { line.as_str() };
                if line.trim_end_matches('\r') == delimiter {
                    closed = true;
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            if !closed {
                out.unbalanced = true;
            }
            let body = if expands {
                expand(out, &body, depth)
            } else {
                Word { text: body, quoted: true, ..Word::default() }
            };
            if let Some(heredoc) = self.heredocs.get_mut(id) {
                heredoc.body = Some(body);
            }
            self.deliver(out, id);
        }
    }

    /// Puts a here-document's body into its command once both are known.
    fn deliver(&mut self, out: &mut Output, id: usize) {
        let Some(heredoc) = self.heredocs.get_mut(id) else { return };
        let Some((command, redirect)) = heredoc.slot else { return };
        let Some(body) = heredoc.body.take() else { return };
        if let Some(redirect) =
            out.commands.get_mut(command).and_then(|command| command.redirects.get_mut(redirect))
        {
            redirect.target = body;
        }
    }

    /// Works out what this parser's commands read on standard input: code for a shell or an
    /// interpreter (parsed or kept as its inline program), and whether a download feeds it.
    fn settle(&self, out: &mut Output, depth: usize) {
        let mut at: HashMap<(usize, usize), usize> = HashMap::new();
        let mut first_download: HashMap<usize, usize> = HashMap::new();
        for &index in &self.own {
            let Some(command) = out.commands.get(index) else { continue };
            at.insert((command.pipeline, command.position), index);
            if command.is_download() {
                let first = first_download.entry(command.pipeline).or_insert(command.position);
                *first = (*first).min(command.position);
            }
        }
        let mut fed = Vec::new();
        for &index in &self.own {
            let Some(command) = out.commands.get(index) else { continue };
            let (text, downloads) = if let Some(redirect) =
                command.redirects.iter().rev().find(|r| r.feeds_stdin())
            {
                let holds_text =
                    matches!(redirect.kind, RedirectKind::HereDoc | RedirectKind::HereString);
                (holds_text.then(|| redirect.target.text.clone()), redirect.target.downloads)
            } else if command.position > 0 {
                let previous = at
                    .get(&(command.pipeline, command.position - 1))
                    .and_then(|&previous| out.commands.get(previous));
                let text = previous.and_then(printed_text);
                let downloaded = first_download
                    .get(&command.pipeline)
                    .is_some_and(|&first| first < command.position);
                let prints_download = text.is_some()
                    && previous
                        .is_some_and(|previous| previous.args().iter().any(|word| word.downloads));
                (text, downloaded || prints_download)
            } else {
                (None, false)
            };
            if text.is_some() || downloads {
                fed.push((index, text, downloads));
            }
        }
        for (index, text, downloads) in fed {
            let reader = out
                .commands
                .get(index)
                .and_then(|command| code_source(&command.argv))
                .and_then(|(reader, code)| matches!(code, Code::Stdin).then_some(reader));
            if let Some(command) = out.commands.get_mut(index) {
                command.stdin = text.clone();
                command.runs_download |= reader.is_some() && downloads;
                if let (Some(Reader::Interpreter(language)), Some(code)) = (reader, &text)
                    && command.inline.is_none()
                {
                    command.inline = Some(Inline { language, code: code.clone() });
                }
            }
            if let (Some(Reader::Shell), Some(text)) = (reader, text) {
                parse_text(out, &text, depth + 1);
            }
        }
    }
}

/// Scans a here-document's body for the substitutions that run when it is read.
fn expand(out: &mut Output, text: &str, depth: usize) -> Word {
    let mut parser = Parser::new(text);
    let mut word = Word::default();
    parser.double_quoted(out, &mut word, depth, None, false);
    parser.settle(out, depth);
    word
}

/// What `echo`, `printf` or `cat <<EOF` print, when the line holds it.
fn printed_text(command: &Command) -> Option<String> {
    let args = command.args().iter().map(|word| word.text.as_str());
    match command.program() {
        "echo" => {
            let words: Vec<&str> =
                args.skip_while(|arg| matches!(*arg, "-n" | "-e" | "-E" | "-ne" | "-en")).collect();
            Some(words.join(" ").replace("\\n", "\n"))
        }
        "printf" => {
            Some(args.collect::<Vec<_>>().join(" ").replace("\\n", "\n").replace("\\t", "\t"))
        }
        "cat" if command.args().is_empty() => command
            .redirects
            .iter()
            .rev()
            .find(|redirect| {
                matches!(redirect.kind, RedirectKind::HereDoc | RedirectKind::HereString)
            })
            .map(|redirect| redirect.target.text.clone()),
        _ => None,
    }
}
