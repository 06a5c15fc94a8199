//! The rules for inline programs (`python -c`, `node -e`, `perl -e`, `ruby -e`, …): the
//! directory trees they delete and the shell commands they run.

use super::paths::{Target, classify, report_delete};
use super::{Findings, check_script};
use crate::shell::{self, Command, Inline, Language};

/// Inline programs that run shell commands that run inline programs… are followed this deep.
const MAX_INLINE_DEPTH: usize = 3;

/// Calls that delete a directory tree: Python's `shutil.rmtree`, Ruby's `FileUtils.rm_rf`,
/// Perl's `File::Path::remove_tree`, Node's `fs.rmSync`, …
const TREE_DELETE_CALLS: &[&str] = &[
    "rmtree",
    "removedirs",
    "rm_rf",
    "rm_r",
    "remove_dir",
    "remove_entry",
    "remove_entry_secure",
    "remove_tree",
    "rmSync",
    "rmdirSync",
    "removeSync",
    "rimraf",
    "rimrafSync",
];

/// Calls that run a shell command: `os.system`, `subprocess.run`, `system`, `execSync`, …
const SHELL_CALLS: &[&str] = &[
    "system",
    "popen",
    "spawn",
    "exec",
    "execSync",
    "execFile",
    "execFileSync",
    "spawnSync",
    "shell_exec",
    "passthru",
    "check_call",
    "check_output",
    "call",
    "run",
    "Popen",
    "getoutput",
    "getstatusoutput",
    "capture2",
    "capture2e",
    "capture3",
    "popen2",
    "popen3",
];

/// Spellings of the home directory in inline programs.
const HOME_EXPRESSIONS: &[&str] =
    &["expanduser", "Path.home", "Dir.home", "homedir", "expand_path", "ENV{HOME}", "env.HOME"];

/// At most this many calls of an inline program are looked at.
const MAX_CALLS: usize = 64;

pub(super) fn check_inline(
    command: &Command,
    inline: &Inline,
    depth: usize,
    findings: &mut Findings,
) {
    let interpreter = command.program();
    for (call, arguments) in calls(&inline.code, TREE_DELETE_CALLS) {
        let who = format!("the `{interpreter}` program's `{call}(…)`");
        report_delete(&who, inline_path(arguments), findings);
    }
    if depth >= MAX_INLINE_DEPTH {
        return;
    }
    let mut commands: Vec<String> = calls(&inline.code, SHELL_CALLS)
        .into_iter()
        .map(|(_, arguments)| string_literals(arguments).join(" "))
        .collect();
    if matches!(inline.language, Language::Perl | Language::Ruby) {
        // Back quotes run a command in Perl and Ruby.
        commands.extend(inline.code.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    for text in commands.iter().filter(|text| !text.trim().is_empty()) {
        check_script(&shell::parse(text), depth + 1, findings);
    }
}

/// Where the path given to a tree-deleting call points: a string literal, or the home
/// directory when the arguments spell it.
fn inline_path(arguments: &str) -> Target {
    let literals = string_literals(arguments);
    let mut paths = literals.iter().filter(|literal| literal.as_str() != "HOME");
    let home = HOME_EXPRESSIONS.iter().any(|expression| arguments.contains(expression))
        || literals.iter().any(|literal| literal == "HOME");
    match (home, paths.next()) {
        (true, None) => Target::Home,
        (true, Some(path)) => {
            classify(&format!("~/{}", path.trim_start_matches('~').trim_start_matches('/')))
        }
        (false, Some(path)) => classify(path),
        (false, None) => Target::Unknown,
    }
}

/// The calls of `names` in `code`, each with the text of its arguments (calls nested in
/// those arguments are not listed again). String literals are skipped, so a name inside one
/// is no call; Perl's and Ruby's `system "…"` count as calls.
fn calls<'a>(code: &'a str, names: &[&str]) -> Vec<(&'a str, &'a str)> {
    let bytes = code.as_bytes();
    let is_identifier = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    let mut found = Vec::new();
    let mut index = 0;
    while index < bytes.len() && found.len() < MAX_CALLS {
        let byte = bytes[index];
        if matches!(byte, b'\'' | b'"') {
            index = skip_literal(bytes, index);
            continue;
        }
        if !is_identifier(byte) {
            index += 1;
            continue;
        }
        let start = index;
        while index < bytes.len() && is_identifier(bytes[index]) {
            index += 1;
        }
        let Some(name) = code.get(start..index).filter(|name| names.contains(name)) else {
            continue;
        };
        let mut open = index;
        while bytes.get(open) == Some(&b' ') {
            open += 1;
        }
        match bytes.get(open) {
            // The scan goes on after the arguments, so no text is looked at twice.
            Some(b'(') => {
                let close = matching_paren(bytes, open);
                found.extend(code.get(open + 1..close).map(|arguments| (name, arguments)));
                index = close;
            }
            Some(b'\'' | b'"') => {
                let end = bytes[open..]
                    .iter()
                    .position(|&byte| byte == b';' || byte == b'\n')
                    .map_or(bytes.len(), |length| open + length);
                found.extend(code.get(open..end).map(|arguments| (name, arguments)));
                index = end;
            }
            _ => {}
        }
    }
    found
}

/// The index after the string literal that starts at `start`.
fn skip_literal(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut index = start + 1;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            byte if byte == quote => return index + 1,
            _ => index += 1,
        }
    }
    bytes.len()
}

/// The index of the `)` that closes the `(` at `open`, or the end of the code.
fn matching_paren(bytes: &[u8], open: usize) -> usize {
    let mut level = 0usize;
    let mut index = open;
    while index < bytes.len() {
        match bytes[index] {
            b'\'' | b'"' => {
                index = skip_literal(bytes, index);
                continue;
            }
            b'(' => level += 1,
            b')' => {
                level -= 1;
                if level == 0 {
                    return index;
                }
            }
            _ => {}
        }
        index += 1;
    }
    bytes.len()
}

/// The string literals of a piece of code, with their escapes read.
fn string_literals(code: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if !matches!(c, '\'' | '"') {
            continue;
        }
        let mut literal = String::new();
        while let Some(inner) = chars.next() {
            match inner {
                '\\' => match chars.next() {
                    Some('n') => literal.push('\n'),
                    Some('t') => literal.push('\t'),
                    Some(escaped) => literal.push(escaped),
                    None => {}
                },
                quote if quote == c => break,
                _ => literal.push(inner),
            }
        }
        if !literal.is_empty() {
            literals.push(literal);
        }
    }
    literals
}
