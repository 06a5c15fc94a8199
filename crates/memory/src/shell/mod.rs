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

mod code;
mod parser;
mod runners;

use parser::{Output, parse_text, read_flat};

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

/// A shell variable name: a letter or `_`, then letters, digits and `_`.
fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
