//! A small parser of POSIX-ish shell command lines into the simple commands they run, so the
//! guard judges commands rather than substrings.
//!
//! It is not a shell. It reads enough of the grammar (separators and pipes, quoting, command
//! and process substitutions, here-documents, functions, and the usual ways one command runs
//! another: `sudo`, `env`, `xargs`, `bash -c`, `eval`, `find -exec`, `ssh`, an interpreter
//! fed by a pipe) to tell the commands a line runs from the text it only passes around:
//! `echo "rm -rf /"` is one harmless `echo`. It never fails and never panics: unbalanced
//! quotes and brackets are read as if closed at the end of the text, and whatever nests deeper
//! than [`MAX_DEPTH`] is read word by word, quotes ignored.

use std::collections::HashMap;

/// How deep substitutions, subshells and command strings are followed; deeper text is read
/// word by word.
pub(crate) const MAX_DEPTH: usize = 8;

/// Every simple command `text` runs, nested ones included.
pub(crate) fn parse(text: &str) -> Script {
    let mut output = Output::default();
    parse_text(&mut output, text, 0);
    Script { commands: output.commands, too_deep: output.too_deep, unbalanced: output.unbalanced }
}

/// The commands of `text` read word by word, quotes ignored: what [`parse`] falls back to
/// past [`MAX_DEPTH`], and a second reading of text whose quotes do not balance.
pub(crate) fn parse_words(text: &str) -> Script {
    let mut output = Output::default();
    read_flat(&mut output, text);
    Script { commands: output.commands, too_deep: false, unbalanced: false }
}

/// The simple commands of a command line in the order they were read (a substitution's
/// commands come before the command that holds it).
#[derive(Debug, Default)]
pub(crate) struct Script {
    pub(crate) commands: Vec<Command>,
    /// Some part nested deeper than [`MAX_DEPTH`] and was only read word by word.
    pub(crate) too_deep: bool,
    /// A quote, bracket or here-document was not closed.
    pub(crate) unbalanced: bool,
}

/// One simple command: a program, its arguments and its redirections.
#[derive(Debug, Clone, Default)]
pub(crate) struct Command {
    /// The program and its arguments, without the assignments (`FOO=1`), reserved words
    /// (`if`, `then`, `!`) and runners (`sudo`, `env`, `xargs`, …) before them.
    pub(crate) argv: Vec<Word>,
    /// The runners taken off the front, in order: `sudo xargs rm` has `["sudo", "xargs"]`.
    pub(crate) runners: Vec<String>,
    pub(crate) redirects: Vec<Redirect>,
    /// The commands of one pipeline share this number; `position` is the place in it, from 0.
    pub(crate) pipeline: usize,
    pub(crate) position: usize,
    /// The program an interpreter runs from its arguments or its standard input
    /// (`python -c`, `perl -e`, `node -e`, `python3 <<EOF`).
    pub(crate) inline: Option<Inline>,
    /// What the command reads on standard input when the line itself holds it: a
    /// here-document, a here-string, or what `echo`, `printf` or `cat <<EOF` pipe into it.
    pub(crate) stdin: Option<String>,
    /// Runs code fetched from the network: `curl … | sh`, `bash <(curl …)`,
    /// `sh -c "$(curl …)"`, `eval "$(wget -O- …)"`.
    pub(crate) runs_download: bool,
    /// The function whose body holds the command.
    pub(crate) function: Option<String>,
}

impl Command {
    /// The program's file name (`rm` for `/bin/rm`); empty for a command of redirections only.
    pub(crate) fn program(&self) -> &str {
        self.argv.first().map_or("", |word| file_name(&word.text))
    }

    /// The arguments after the program.
    pub(crate) fn args(&self) -> &[Word] {
        self.argv.get(1..).unwrap_or_default()
    }

    /// The command as it reads, for messages, shortened past 80 characters.
    pub(crate) fn display(&self) -> String {
        let text = self.argv.iter().map(|word| word.text.as_str()).collect::<Vec<_>>().join(" ");
        shorten(&text, 80)
    }

    /// Fetches from the network and can write what it fetched to standard output.
    pub(crate) fn is_download(&self) -> bool {
        matches!(self.program(), "curl" | "wget")
    }
}

/// One word of a command, after quote removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Word {
    /// The text without its quotes; expansions (`$HOME`) and substitutions (`$(pwd)`) are left
    /// as written.
    pub(crate) text: String,
    /// Part of the word was quoted or escaped.
    pub(crate) quoted: bool,
    /// The word holds a command or process substitution.
    pub(crate) substitutes: bool,
    /// One of those substitutions fetches from the network.
    pub(crate) downloads: bool,
    /// `NAME=value`, an assignment when it comes before the command.
    assignment: bool,
}

impl Word {
    fn literal(text: String) -> Word {
        let assignment = text.split_once('=').is_some_and(|(name, _)| is_name(name));
        Word { text, assignment, ..Word::default() }
    }
}

/// A redirection: `> file`, `2>&1`, `< input`, `<<EOF`, `<<< text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub(crate) kind: RedirectKind,
    /// The file descriptor written before the operator (`2>`), if any.
    pub(crate) fd: Option<u32>,
    /// The file, the descriptor duplicated, or the text of a here-document or here-string.
    pub(crate) target: Word,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirectKind {
    /// `<`
    Read,
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `<>`
    Write,
    /// `>&N`, `<&N`
    Duplicate,
    /// `<<`, `<<-`
    HereDoc,
    /// `<<<`
    HereString,
}

impl Redirect {
    fn feeds_stdin(&self) -> bool {
        matches!(self.fd, None | Some(0))
            && matches!(
                self.kind,
                RedirectKind::Read | RedirectKind::HereDoc | RedirectKind::HereString
            )
    }
}

/// A program an interpreter runs without a file: `python -c CODE`, `python3 <<EOF`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inline {
    pub(crate) language: Language,
    pub(crate) code: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Language {
    Python,
    Perl,
    Ruby,
    JavaScript,
    Php,
}

/// The file name of a path: `rm` for `/bin/rm`.
pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `text` cut to `limit` characters, with an ellipsis when cut.
pub(crate) fn shorten(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Shells whose `-c` argument, script operand or standard input is code.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"];

/// Words that open or close a compound command; what follows them is a command.
const RESERVED_WORDS: &[&str] =
    &["if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "esac"];

/// `ssh` options that take a value.
const SSH_VALUE_OPTIONS: &str = "BbcDEeFIiJLlmOoPpQRSWw";

/// What the parsing of one text (and of everything nested in it) produces.
#[derive(Default)]
struct Output {
    commands: Vec<Command>,
    pipelines: usize,
    too_deep: bool,
    unbalanced: bool,
}

impl Output {
    fn new_pipeline(&mut self) -> usize {
        self.pipelines += 1;
        self.pipelines
    }

    fn downloads_since(&self, start: usize) -> bool {
        self.commands.get(start..).unwrap_or_default().iter().any(Command::is_download)
    }
}

/// Parses `text`, found `depth` levels deep, into `out`.
fn parse_text(out: &mut Output, text: &str, depth: usize) {
    if depth > MAX_DEPTH {
        out.too_deep = true;
        read_flat(out, text);
        return;
    }
    let mut parser = Parser {
        chars: text.chars().collect(),
        pos: 0,
        heredocs: Vec::new(),
        next_heredoc: 0,
        own: Vec::new(),
    };
    parser.script(out, depth, Until::End, None);
    parser.read_heredocs(out, depth);
    parser.settle(out, depth);
}

/// Reads `text` without quoting or nesting: the fallback past [`MAX_DEPTH`]. Quotes, back
/// quotes and brackets separate words or commands, so every word is still looked at.
fn read_flat(out: &mut Output, text: &str) {
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
struct Place<'a> {
    pipeline: usize,
    position: usize,
    function: Option<&'a str>,
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
    let mut parser = Parser {
        chars: text.chars().collect(),
        pos: 0,
        heredocs: Vec::new(),
        next_heredoc: 0,
        own: Vec::new(),
    };
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

/// Makes a command of `words`: takes assignments, reserved words and runners off the front,
/// and reads the code it runs (`bash -c`, `eval`, `find -exec`, `python -c`, …). Past
/// [`MAX_DEPTH`] nothing is read further: the code words stay arguments.
fn build(
    out: &mut Output,
    mut words: Vec<Word>,
    redirects: Vec<Redirect>,
    depth: usize,
    place: &Place,
) -> Option<Command> {
    let flat = depth > MAX_DEPTH;
    let mut runners = Vec::new();
    let mut start = 0;
    while let Some(word) = words.get(start) {
        if word.assignment || (!word.quoted && RESERVED_WORDS.contains(&word.text.as_str())) {
            start += 1;
            continue;
        }
        let Some(length) = runner_length(words.get(start..).unwrap_or_default(), flat) else {
            break;
        };
        runners.push(file_name(&word.text).to_owned());
        start += length;
    }
    let argv = words.split_off(start.min(words.len()));
    if argv.is_empty() && redirects.is_empty() {
        return None;
    }
    let mut command = Command {
        argv,
        runners,
        redirects,
        pipeline: place.pipeline,
        position: place.position,
        function: place.function.map(str::to_owned),
        ..Command::default()
    };
    command.runs_download = command.argv.first().is_some_and(|word| word.downloads);
    if !flat {
        read_nested(out, &mut command, depth, place);
    }
    Some(command)
}

/// How many words a runner and its options take before the command it runs, if `words`
/// starts with one and a command follows. Past [`MAX_DEPTH`] (`flat`), `bash -c`, `eval`,
/// `su -c` and `ssh HOST` count as runners too, so the words after them are still read as a
/// command.
fn runner_length(words: &[Word], flat: bool) -> Option<usize> {
    let name = file_name(&words.first()?.text);
    let length = match name {
        "sudo" => skip_options(
            words,
            "ugpCDrtTUR",
            &[
                "user",
                "group",
                "prompt",
                "close-from",
                "chdir",
                "role",
                "type",
                "other-user",
                "host",
            ],
        ),
        "doas" => skip_options(words, "uC", &[]),
        "env" => skip_options(words, "uCS", &["unset", "chdir", "split-string"]),
        "nice" => skip_options(words, "n", &["adjustment"]),
        "ionice" => skip_options(words, "cnp", &["class", "classdata", "pid"]),
        "stdbuf" => skip_options(words, "ioe", &["input", "output", "error"]),
        "time" => skip_options(words, "fo", &["format", "output"]),
        "nohup" | "builtin" | "busybox" | "setsid" | "unbuffer" => skip_options(words, "", &[]),
        "xargs" => skip_options(
            words,
            "nLIPdEsa",
            &[
                "max-args",
                "max-lines",
                "replace",
                "max-procs",
                "delimiter",
                "eof",
                "max-chars",
                "arg-file",
                "process-slot-var",
            ],
        ),
        "command" => {
            // `command -v NAME` only looks a program up.
            if words
                .get(1)
                .is_some_and(|word| word.text.starts_with("-v") || word.text.starts_with("-V"))
            {
                return None;
            }
            skip_options(words, "", &[])
        }
        "exec" => skip_options(words, "a", &[]),
        "timeout" => skip_options(words, "sk", &["signal", "kill-after"]) + 1,
        shell if flat && SHELLS.contains(&shell) => {
            skip_options(words, "oO", &["rcfile", "init-file"])
        }
        "su" if flat => skip_options(words, "gGsw", &["group", "shell"]),
        "eval" if flat => 1,
        "ssh" if flat => skip_options(words, SSH_VALUE_OPTIONS, &[]) + 1,
        _ => return None,
    };
    (length < words.len()).then_some(length)
}

/// The index of the first word after `words[0]` and its options. `short_values` are the
/// short options that take a value (the rest of their group, or the next word);
/// `long_values` the long ones that take the next word when written without `=`.
fn skip_options(words: &[Word], short_values: &str, long_values: &[&str]) -> usize {
    let mut index = 1;
    while let Some(word) = words.get(index) {
        let text = word.text.as_str();
        if text == "--" {
            return index + 1;
        }
        index += 1;
        if let Some(long) = text.strip_prefix("--") {
            if !long.contains('=') && long_values.contains(&long) {
                index += 1;
            }
        } else if let Some(letters) = text.strip_prefix('-').filter(|letters| !letters.is_empty()) {
            if let Some((at, letter)) =
                letters.char_indices().find(|(_, l)| short_values.contains(*l))
                && at + letter.len_utf8() == letters.len()
            {
                index += 1;
            }
        } else {
            return index - 1;
        }
    }
    index
}

/// Reads the code a command runs: a shell's `-c` string, `eval`'s arguments, `su -c`, the
/// remote command of `ssh`, `find -exec`, `env -S`, and interpreters' inline programs.
fn read_nested(out: &mut Output, command: &mut Command, depth: usize, place: &Place) {
    if let Some((reader, code)) = code_source(&command.argv) {
        match code {
            Code::Inline { text, downloads } => {
                command.runs_download |= downloads;
                match reader {
                    Reader::Shell => parse_text(out, &text, depth + 1),
                    Reader::Interpreter(language) => {
                        command.inline = Some(Inline { language, code: text });
                    }
                }
            }
            Code::Operand(index) => {
                command.runs_download |= command.argv.get(index).is_some_and(|word| word.downloads);
            }
            Code::Stdin | Code::Nothing => {}
        }
        return;
    }
    let args = command.args();
    // The code the command runs, and whether it comes from a download.
    let code: Option<(String, bool)> = match command.program() {
        "eval" => Some((join(args), args.iter().any(|word| word.downloads))),
        "source" | "." => {
            command.runs_download |= args.first().is_some_and(|word| word.downloads);
            None
        }
        "su" => {
            option_value(args, "-c", "--command").map(|word| (word.text.clone(), word.downloads))
        }
        "env" => option_value(args, "-S", "--split-string")
            .map(|word| (word.text.clone(), word.downloads)),
        "ssh" => {
            let host = skip_options(&command.argv, SSH_VALUE_OPTIONS, &[]);
            command
                .argv
                .get(host + 1..)
                .filter(|remote| !remote.is_empty())
                .map(|remote| (join(remote), false))
        }
        "find" => {
            let mut words = args.iter();
            while let Some(word) = words.next() {
                if !matches!(word.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                    continue;
                }
                let run: Vec<Word> = words
                    .by_ref()
                    .take_while(|word| !matches!(word.text.as_str(), ";" | "+"))
                    .cloned()
                    .collect();
                let nested =
                    Place { pipeline: out.new_pipeline(), position: 0, function: place.function };
                if let Some(nested) = build(out, run, Vec::new(), depth + 1, &nested) {
                    out.commands.push(nested);
                }
            }
            None
        }
        _ => None,
    };
    if let Some((text, downloads)) = code {
        command.runs_download |= downloads;
        parse_text(out, &text, depth + 1);
    }
}

/// The words' texts joined by spaces, as a shell joins `eval`'s arguments.
fn join(words: &[Word]) -> String {
    words.iter().map(|word| word.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// The value of option `short` (`-c VALUE`, `-cVALUE`) or `long` (`--command=VALUE`,
/// `--command VALUE`).
fn option_value<'a>(args: &'a [Word], short: &str, long: &str) -> Option<&'a Word> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word.text == short || word.text == long {
            return words.next();
        }
        if word.text.strip_prefix(long).is_some_and(|rest| rest.starts_with('=')) {
            return Some(word);
        }
    }
    None
}

/// What runs code: a shell or an interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Shell,
    Interpreter(Language),
}

/// Where a shell or interpreter takes its code from.
#[derive(Debug, PartialEq, Eq)]
enum Code {
    /// An argument: `bash -c CODE`, `python -c CODE`.
    Inline { text: String, downloads: bool },
    /// A file named by the argument at this index: `bash install.sh`, `bash <(curl …)`.
    Operand(usize),
    /// Standard input: `bash`, `sh -s`, `python3 -`.
    Stdin,
    /// No code to read: `python -m module`.
    Nothing,
}

fn code_source(argv: &[Word]) -> Option<(Reader, Code)> {
    let program = file_name(&argv.first()?.text);
    if SHELLS.contains(&program) {
        return Some((Reader::Shell, shell_code(argv)));
    }
    let interpreter = interpreter(program)?;
    Some((Reader::Interpreter(interpreter.language), interpreter_code(argv, &interpreter)))
}

fn shell_code(argv: &[Word]) -> Code {
    let mut command_string = false;
    let mut from_stdin = false;
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        let text = word.text.as_str();
        if text == "--" {
            index += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            index += if matches!(long, "rcfile" | "init-file") { 2 } else { 1 };
            continue;
        }
        let Some(letters) = text.strip_prefix(['-', '+']).filter(|letters| !letters.is_empty())
        else {
            break;
        };
        command_string |= letters.contains('c');
        from_stdin |= letters.contains('s');
        index += if letters.ends_with(['o', 'O']) { 2 } else { 1 };
    }
    match argv.get(index) {
        Some(word) if command_string => {
            Code::Inline { text: word.text.clone(), downloads: word.downloads }
        }
        _ if command_string => Code::Nothing,
        Some(word) if !from_stdin && word.text != "-" => Code::Operand(index),
        _ => Code::Stdin,
    }
}

/// How an interpreter's command line names its inline program.
struct Interpreter {
    language: Language,
    /// Short options whose value is code.
    code: &'static str,
    /// Long options whose value is code.
    long_code: &'static [&'static str],
    /// Short options after which no program is read (`python -m`).
    stop: &'static str,
    /// Short options whose value is the rest of their group or the next word.
    value: &'static str,
    /// Short options whose value is the rest of their group only.
    attached: &'static str,
    /// Long options that take the next word as their value.
    long_value: &'static [&'static str],
}

fn interpreter(program: &str) -> Option<Interpreter> {
    let versioned = |prefix: &str| {
        program
            .strip_prefix(prefix)
            .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    let interpreter = if versioned("python") || versioned("pypy") {
        Interpreter {
            language: Language::Python,
            code: "c",
            long_code: &[],
            stop: "m",
            value: "WX",
            attached: "",
            long_value: &[],
        }
    } else if versioned("perl") {
        Interpreter {
            language: Language::Perl,
            code: "eE",
            long_code: &[],
            stop: "",
            value: "",
            attached: "MmIix0lCdD",
            long_value: &[],
        }
    } else if versioned("ruby") {
        Interpreter {
            language: Language::Ruby,
            code: "e",
            long_code: &[],
            stop: "",
            value: "rICE",
            attached: "0lFTxWK",
            long_value: &[],
        }
    } else if matches!(program, "node" | "nodejs") {
        Interpreter {
            language: Language::JavaScript,
            code: "ep",
            long_code: &["eval", "print"],
            stop: "",
            value: "r",
            attached: "",
            long_value: &["require", "import", "loader"],
        }
    } else if versioned("php") {
        Interpreter {
            language: Language::Php,
            code: "r",
            long_code: &[],
            stop: "",
            value: "cdz",
            attached: "",
            long_value: &[],
        }
    } else {
        return None;
    };
    Some(interpreter)
}

fn interpreter_code(argv: &[Word], interpreter: &Interpreter) -> Code {
    let mut code: Option<String> = None;
    let mut downloads = false;
    let mut add = |text: &str, from_download: bool| {
        downloads |= from_download;
        match &mut code {
            Some(code) => {
                code.push('\n');
                code.push_str(text);
            }
            None => code = Some(text.to_owned()),
        }
    };
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        let text = word.text.as_str();
        if text == "--" {
            index += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            index += 1;
            let (name, value) =
                long.split_once('=').map_or((long, None), |(name, value)| (name, Some(value)));
            if interpreter.long_code.contains(&name) {
                match value {
                    Some(value) => add(value, word.downloads),
                    None => {
                        if let Some(next) = argv.get(index) {
                            add(&next.text, next.downloads);
                        }
                        index += 1;
                    }
                }
            } else if value.is_none() && interpreter.long_value.contains(&name) {
                index += 1;
            }
            continue;
        }
        let Some(letters) = text.strip_prefix('-').filter(|letters| !letters.is_empty()) else {
            break;
        };
        index += 1;
        for (at, letter) in letters.char_indices() {
            let rest = letters.get(at + letter.len_utf8()..).unwrap_or_default();
            if interpreter.stop.contains(letter) {
                return Code::Nothing;
            }
            if interpreter.code.contains(letter) {
                if rest.is_empty() {
                    if let Some(next) = argv.get(index) {
                        add(&next.text, next.downloads);
                    }
                    index += 1;
                } else {
                    add(rest, word.downloads);
                }
                break;
            }
            if interpreter.value.contains(letter) {
                if rest.is_empty() {
                    index += 1;
                }
                break;
            }
            if interpreter.attached.contains(letter) {
                break;
            }
        }
    }
    if let Some(text) = code {
        return Code::Inline { text, downloads };
    }
    match argv.get(index) {
        Some(word) if word.text != "-" => Code::Operand(index),
        _ => Code::Stdin,
    }
}

/// A shell variable name: a letter or `_`, then letters, digits and `_`.
fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each command of `text` as its words joined by spaces, in the order read.
    fn commands(text: &str) -> Vec<String> {
        parse(text).commands.iter().map(|command| command.display()).collect()
    }

    fn only(text: &str) -> Command {
        let mut script = parse(text);
        assert_eq!(script.commands.len(), 1, "{text}: {:?}", script.commands);
        script.commands.remove(0)
    }

    #[test]
    fn separators_split_commands() {
        assert_eq!(commands("a; b && c || d | e & f\ng"), ["a", "b", "c", "d", "e", "f", "g"]);
        assert_eq!(commands("a;;b |& c"), ["a", "b", "c"]);
        assert_eq!(commands("  "), Vec::<String>::new());
        assert_eq!(commands("ls # rm -rf /"), ["ls"], "a comment is no command");
        assert_eq!(commands("echo a#b"), ["echo a#b"], "`#` inside a word is no comment");
    }

    #[test]
    fn pipelines_number_their_commands() {
        let script = parse("a | b | c; d");
        let places: Vec<(usize, usize)> =
            script.commands.iter().map(|command| (command.pipeline, command.position)).collect();
        assert_eq!(places[0].0, places[2].0);
        assert_eq!(places.iter().map(|place| place.1).collect::<Vec<_>>(), [0, 1, 2, 0]);
        assert_ne!(places[3].0, places[0].0);
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        let command = only(r#"rm -rf "/" 'a b' c\ d "x\"y" 'it''s' "$HOME" \$x"#);
        let args: Vec<&str> = command.args().iter().map(|word| word.text.as_str()).collect();
        assert_eq!(args, ["-rf", "/", "a b", "c d", "x\"y", "its", "$HOME", "$x"]);
        assert!(command.args()[1].quoted && !command.args()[0].quoted);
        assert_eq!(only("echo $'a\\tb\\x41'").args()[0].text, "a\tbA");
        assert_eq!(only("echo \"a\\nb\"").args()[0].text, "a\\nb", "\\n is not special in \"…\"");
        assert_eq!(commands("echo a \\\n b"), ["echo a b"], "a backslash continues the line");
    }

    #[test]
    fn quoted_text_is_not_a_command() {
        assert_eq!(commands("echo 'rm -rf /' > notes.txt"), ["echo rm -rf /"]);
        assert_eq!(
            commands("git commit -m \"never rm -rf /; ever\""),
            ["git commit -m never rm -rf /; ever"]
        );
        assert_eq!(commands("echo '$(rm -rf /)' \"\\$(rm x)\""), ["echo $(rm -rf /) $(rm x)"]);
    }

    #[test]
    fn substitutions_run() {
        assert_eq!(commands("x=$(rm -rf /)"), ["rm -rf /"], "assignments alone are no command");
        assert_eq!(
            commands("echo \"$(whoami)\" `date`"),
            ["whoami", "date", "echo $(whoami) `date`"]
        );
        assert_eq!(commands("diff <(ls a) >(wc -l)"), ["ls a", "wc -l", "diff <(ls a) >(wc -l)"]);
        assert_eq!(commands("echo $((1 + 2)) ${x:-y}"), ["echo $((1 + 2)) ${x:-y}"]);
        assert_eq!(commands("a $(b $(c) \")\") d"), ["c", "b $(c) )", "a $(b $(c) \")\") d"]);
        let word = &only("echo x").argv[1];
        assert!(!word.substitutes);
        let script = parse("cat <(curl -s x)");
        let cat = script.commands.last().unwrap();
        assert!(cat.args()[0].substitutes && cat.args()[0].downloads);
    }

    #[test]
    fn subshells_groups_and_compound_commands() {
        assert_eq!(commands("(cd /tmp && rm x)"), ["cd /tmp", "rm x"]);
        assert_eq!(commands("{ a; b; }"), ["a", "b"]);
        assert_eq!(
            commands("if true; then rm -rf /; else echo no; fi"),
            ["true", "rm -rf /", "echo no"]
        );
        assert_eq!(commands("while read f; do rm \"$f\"; done"), ["read f", "rm $f"]);
        assert_eq!(commands("! grep -q x f"), ["grep -q x f"]);
    }

    #[test]
    fn runners_come_off_the_front() {
        let command = only("sudo -u root -E env FOO=1 BAR=2 nice -n 10 nohup /bin/rm -rf /");
        assert_eq!(command.display(), "/bin/rm -rf /");
        assert_eq!(command.program(), "rm");
        assert_eq!(command.runners, ["sudo", "env", "nice", "nohup"]);
        assert_eq!(only("FOO=bar BAZ=\"a b\" make").display(), "make");
        assert_eq!(only("time -p timeout -s KILL 10 xargs -0 -n1 rm -f").display(), "rm -f");
        assert_eq!(only("command -v rm").display(), "command -v rm", "`command -v` runs nothing");
        assert_eq!(only("exec doas -u admin rm x").display(), "rm x");
        assert_eq!(only("sudo").display(), "sudo", "a runner with nothing to run is the command");
    }

    #[test]
    fn command_strings_are_parsed() {
        assert_eq!(commands("bash -c 'rm -rf /'"), ["rm -rf /", "bash -c rm -rf /"]);
        assert_eq!(commands("sh -xec \"a; b\""), ["a", "b", "sh -xec a; b"]);
        assert_eq!(commands("zsh -lc 'a | b'"), ["a", "b", "zsh -lc a | b"]);
        assert_eq!(commands("eval 'a' b"), ["a b", "eval a b"]);
        assert_eq!(commands("su -c 'rm x' root"), ["rm x", "su -c rm x root"]);
        assert_eq!(
            commands("ssh -p 22 host 'rm -rf /tmp/x'"),
            ["rm -rf /tmp/x", "ssh -p 22 host rm -rf /tmp/x"]
        );
        assert_eq!(commands("ssh host"), ["ssh host"]);
        assert_eq!(
            commands("find . -exec rm -rf {} \\; -print"),
            ["rm -rf {}", "find . -exec rm -rf {} ; -print"]
        );
        assert_eq!(commands("bash script.sh"), ["bash script.sh"]);
    }

    #[test]
    fn inline_programs_are_exposed() {
        let python = only("python3 -c \"import shutil; shutil.rmtree('/')\"");
        let inline = python.inline.unwrap();
        assert_eq!(
            (inline.language, inline.code.as_str()),
            (Language::Python, "import shutil; shutil.rmtree('/')")
        );
        let perl = only("perl -MFile::Path=rmtree -pe 's/a/b/' -e 'rmtree(\"/\")' file");
        assert_eq!(perl.inline.map(|inline| inline.code), Some("s/a/b/\nrmtree(\"/\")".to_owned()));
        assert_eq!(
            only("ruby -r json -e 'puts 1'").inline.map(|inline| inline.code),
            Some("puts 1".to_owned())
        );
        assert_eq!(
            only("node --eval=\"x()\"").inline.map(|inline| inline.code),
            Some("x()".to_owned())
        );
        assert_eq!(
            only("php -r 'system(\"ls\");'").inline.map(|inline| inline.language),
            Some(Language::Php)
        );
        assert_eq!(only("python -m json.tool").inline, None);
        assert_eq!(
            only("python3.11 script.py -c x").inline,
            None,
            "-c after the script is the script's"
        );
        let heredoc = parse("python3 - <<'EOF'\nimport os\nos.system('ls')\nEOF\necho done");
        assert_eq!(
            heredoc.commands[0].inline.as_ref().map(|inline| inline.code.as_str()),
            Some("import os\nos.system('ls')\n")
        );
        assert_eq!(heredoc.commands[1].display(), "echo done");
    }

    #[test]
    fn here_documents_are_text_unless_a_shell_reads_them() {
        let commit =
            "git commit -m \"$(cat <<'EOF'\nFix: never rm -rf / (really)\n\nEOF\n)\" && git push";
        assert_eq!(commands(commit)[0], "cat");
        assert_eq!(commands(commit).len(), 3, "{:?}", commands(commit));
        let cat = &parse(commit).commands[0];
        assert_eq!(cat.redirects[0].kind, RedirectKind::HereDoc);
        assert_eq!(cat.redirects[0].target.text, "Fix: never rm -rf / (really)\n\n");
        assert_eq!(commands("bash <<EOF\nrm -rf /\nEOF"), ["bash", "rm -rf /"]);
        assert_eq!(commands("cat <<-END | sh\n\techo hi\n\tEND"), ["cat", "sh", "echo hi"]);
        assert_eq!(
            commands("cat <<EOF\n$(rm -rf ~)\nEOF"),
            ["cat", "rm -rf ~"],
            "an unquoted here-document expands"
        );
        assert_eq!(commands("cat <<'EOF'\n$(rm -rf ~)\nEOF"), ["cat"]);
        assert_eq!(only("psql <<< 'DROP TABLE x'").stdin.as_deref(), Some("DROP TABLE x"));
    }

    #[test]
    fn redirections_are_recorded() {
        let command = only("cat a 2>&1 > /dev/sda >> log <in");
        let redirects: Vec<(RedirectKind, Option<u32>, &str)> = command
            .redirects
            .iter()
            .map(|redirect| (redirect.kind, redirect.fd, redirect.target.text.as_str()))
            .collect();
        assert_eq!(
            redirects,
            [
                (RedirectKind::Duplicate, Some(2), "1"),
                (RedirectKind::Write, None, "/dev/sda"),
                (RedirectKind::Write, None, "log"),
                (RedirectKind::Read, None, "in"),
            ]
        );
        assert_eq!(only("echo 2 > f").args().len(), 1, "a separate `2` is an argument");
        assert_eq!(only("&> out.log").redirects[0].target.text, "out.log");
        assert_eq!(only("> /dev/sda").argv.len(), 0, "a command of redirections only is kept");
    }

    #[test]
    fn downloads_fed_to_shells_are_noted() {
        for text in [
            "curl -s x | bash",
            "curl x | tee install.sh | sudo sh -s -- --yes",
            "wget -qO- x | python3",
            "bash <(curl -s x)",
            "sh -c \"$(curl -fsSL x)\"",
            "eval \"$(wget -O- x)\"",
            "source <(curl x)",
            "bash <<< \"$(curl x)\"",
            "$(curl -s x)",
            "python3 -c \"$(curl -s x)\"",
            "echo \"$(curl x)\" | sh",
        ] {
            assert!(parse(text).commands.iter().any(|command| command.runs_download), "{text}");
        }
        for text in [
            "cat <(curl -s x)",
            "curl x | jq .",
            "curl x | python3 -m json.tool",
            "curl -o install.sh x && less install.sh",
            "curl x > script.sh; bash other.sh",
        ] {
            assert!(parse(text).commands.iter().all(|command| !command.runs_download), "{text}");
        }
    }

    #[test]
    fn echoed_text_piped_into_a_shell_runs() {
        assert_eq!(commands("echo 'rm -rf /' | sh"), ["echo rm -rf /", "sh", "rm -rf /"]);
        assert_eq!(commands("printf 'a\\nb' | bash"), ["printf a\\nb", "bash", "a", "b"]);
        assert_eq!(commands("echo 'rm -rf /' | grep rm"), ["echo rm -rf /", "grep rm"]);
        let script = parse("echo 'DROP TABLE x' | psql");
        assert_eq!(script.commands[1].stdin.as_deref(), Some("DROP TABLE x"));
        assert_eq!(script.commands[0].stdin, None, "only the reader has a standard input");
    }

    #[test]
    fn functions_are_named() {
        let script = parse(":(){ :|:& };:");
        let functions: Vec<Option<&str>> =
            script.commands.iter().map(|command| command.function.as_deref()).collect();
        assert_eq!(functions, [Some(":"), Some(":"), None]);
        let script = parse("function f { g; }\nf");
        assert_eq!(script.commands[0].function.as_deref(), Some("f"));
        assert_eq!(script.commands[1].function, None);
    }

    #[test]
    fn odd_input_never_panics_and_is_read_conservatively() {
        for text in [
            "",
            "'",
            "\"",
            "\\",
            "`",
            "$",
            "$(",
            "$((",
            "${",
            "$'",
            "<(",
            ">(",
            ")",
            "(((",
            "}}}",
            "{",
            "<<",
            "<<EOF",
            "<<<",
            "cat <<'EOF'\nno end",
            "a |",
            "| a",
            "&&",
            ";;",
            "\0",
            "2>",
            "&>",
            "a=(",
            "f() {",
            "function",
            "function f {",
            "x=$(",
            "$(<",
            "\r\n",
            "ü 日本 😀 $'\\xff'",
            "bash -c",
            "python -c",
            "perl -e",
            "find . -exec",
            "ssh",
            "sudo -u",
            "env -S",
            "timeout",
            "xargs -n",
        ] {
            let _ = parse(text);
            let _ = parse_words(text);
        }
        let script = parse("rm -rf \"/");
        assert!(script.unbalanced);
        assert_eq!(script.commands[0].display(), "rm -rf /");
        assert_eq!(commands("bash -c 'rm -rf /"), ["rm -rf /", "bash -c rm -rf /"]);
    }

    #[test]
    fn deep_nesting_is_bounded_and_read_word_by_word() {
        let deep = format!("{}rm -rf /{}", "$(".repeat(500), ")".repeat(500));
        let script = parse(&deep);
        assert!(script.too_deep);
        assert!(script.commands.iter().any(|command| command.display() == "rm -rf /"));
        let quoted = format!("{}rm -rf ~{}", "bash -c \"$(".repeat(200), ")\"".repeat(200));
        let script = parse(&quoted);
        assert!(script.too_deep);
        assert!(script.commands.iter().any(|command| command.display() == "rm -rf ~"));
        let backticks = format!("{}rm -rf /", "eval ".repeat(50));
        assert!(parse(&backticks).commands.iter().any(|command| command.display() == "rm -rf /"));
        let parens = format!("{}ls{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse(&parens).commands.iter().any(|command| command.display() == "ls"));
        let braces = "{ ".repeat(10_000);
        let _ = parse(&braces);
    }

    #[test]
    fn long_lines_parse() {
        let long = "echo a; ".repeat(20_000);
        assert_eq!(parse(&long).commands.len(), 20_000);
        let word = "x".repeat(200_000);
        assert_eq!(only(&word).program().len(), 200_000);
        let pipes = "curl x | ".repeat(5_000) + "sh";
        assert!(parse(&pipes).commands.iter().any(|command| command.runs_download));
    }

    use proptest::prelude::*;

    proptest! {
        /// Any text parses, without panic, into commands whose words come from the text.
        #[test]
        fn fuzz_any_text_parses(text in "[ -~\n]{0,160}") {
            let _ = parse(&text);
            let _ = parse_words(&text);
        }

        /// Shell-like text, heavy on the characters that nest and quote.
        #[test]
        fn fuzz_shell_like_text_parses(parts in prop::collection::vec(
            prop::sample::select(vec![
                "rm", "-rf", "/", "$(", ")", "`", "'", "\"", "<(", "|", "&&", ";", "bash -c",
                "echo", "<<EOF", "EOF", "\n", "\\", "sudo", "python -c", "{", "}", "x",
            ]),
            0..40,
        )) {
            let _ = parse(&parts.join(" "));
            let _ = parse(&parts.concat());
        }
    }
}
