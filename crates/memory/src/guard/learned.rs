//! Rules learned from memories: what a memory prohibits, compared with each command the
//! action runs, not with the text it passes around. They warn; they never block.

use std::sync::LazyLock;

use regex::Regex;

use super::git::{Push, git_push};
use crate::shell::{self, Script, Word};
use crate::text;

/// Words that prohibit: what follows them in a sentence is what a memory advises against.
static PROHIBITION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:never|don'?t|do\s+not|must\s+not|mustn'?t|should\s+not|shouldn'?t|avoid|forbidden\s+to|not\s+allowed\s+to|instead\s+of|rather\s+than)\b|,\s*not\b")
        .expect("valid pattern")
});
static BACKTICKED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"`([^`]+)`").expect("valid pattern"));

/// Verbs that say nothing about which command is meant.
const GENERIC_WORDS: &[&str] =
    &["run", "use", "call", "execute", "invoke", "type", "repo", "repository", "ever", "anything"];

/// Programs whose arguments are text to print or search for, not things they act on.
const TEXT_PROGRAMS: &[&str] = &["echo", "printf", "grep", "egrep", "fgrep", "rg", "ag", "ack"];

/// Branch names a memory may name; a rule naming one applies to pushes to it only.
const BRANCH_WORDS: &[&str] = &[
    "main",
    "master",
    "trunk",
    "develop",
    "development",
    "dev",
    "production",
    "prod",
    "staging",
    "release",
    "stable",
];

/// One command of the action, as learned rules compare it with memories.
#[derive(Debug)]
pub(super) struct CommandWords {
    /// The program's name and the arguments, lower case.
    argv: Vec<String>,
    /// The lower-case alphanumeric words of the runners, the program and the arguments (of
    /// the program alone when its arguments are text: `echo`, `grep`, a commit message), and
    /// `force` for a forced push.
    words: Vec<String>,
    push: Option<Push>,
    prints_text: bool,
}

pub(super) fn command_words(script: &Script) -> Vec<CommandWords> {
    script
        .commands
        .iter()
        .filter(|command| !command.argv.is_empty())
        .map(|command| {
            let program = command.program().to_lowercase();
            let prints_text = TEXT_PROGRAMS.contains(&program.as_str());
            let push = git_push(command);
            let mut words: Vec<String> =
                command.runners.iter().flat_map(|runner| text::words(runner)).collect();
            words.extend(text::words(&program));
            if !prints_text {
                let args = command.args();
                for (index, arg) in args.iter().enumerate() {
                    if program == "git" && is_commit_message(args, index) {
                        continue;
                    }
                    words.extend(text::words(&arg.text));
                }
            }
            if push.as_ref().is_some_and(|push| push.forced) {
                words.push("force".to_owned());
            }
            let argv = std::iter::once(program)
                .chain(command.args().iter().map(|word| word.text.to_lowercase()))
                .collect();
            CommandWords { argv, words, push, prints_text }
        })
        .collect()
}

/// `git commit -m MESSAGE`, `--message=MESSAGE`: the argument at `index` is a message.
fn is_commit_message(args: &[Word], index: usize) -> bool {
    let Some(arg) = args.get(index) else { return false };
    if arg.text.starts_with("--message=") {
        return true;
    }
    index.checked_sub(1).and_then(|previous| args.get(previous)).is_some_and(|previous| {
        previous.text == "--message"
            || previous
                .text
                .strip_prefix('-')
                .is_some_and(|letters| !letters.starts_with('-') && letters.ends_with('m'))
    })
}

/// When `memory` prohibits what one of the action's `commands` does, the prohibited phrase.
pub(super) fn learned_rule(memory: &str, commands: &[CommandWords]) -> Option<String> {
    for sentence in sentences(memory) {
        let Some(found) = PROHIBITION.find(sentence) else { continue };
        let clause = &sentence[found.end()..];
        // A quoted command is the most precise statement of what is prohibited.
        let quoted: Vec<&str> = BACKTICKED
            .captures_iter(clause)
            .filter_map(|captures| captures.get(1))
            .map(|quoted| quoted.as_str().trim())
            .filter(|quoted| !quoted.is_empty())
            .collect();
        if !quoted.is_empty() {
            if let Some(command) = quoted.iter().find(|quoted| runs_quoted(commands, quoted)) {
                return Some(format!("`{command}`"));
            }
            continue;
        }
        // "never npm or yarn", "not npm, yarn or bun": each tool named is a rule of its own.
        let tools = alternatives(clause);
        if tools.len() >= 2 {
            let runs = |tool: &str| {
                commands.iter().any(|command| {
                    !command.prints_text
                        && command.argv.first().is_some_and(|program| program == tool)
                })
            };
            if let Some(tool) = tools.iter().find(|tool| runs(tool)) {
                return Some((*tool).to_owned());
            }
            continue;
        }
        let words: Vec<String> = text::words(clause)
            .take_while(|word| word != "use" && word != "instead")
            .filter(|word| {
                word.len() > 1
                    && !text::is_stop_word(word)
                    && !GENERIC_WORDS.contains(&word.as_str())
            })
            .take(4)
            .collect();
        let Some(first) = words.first() else { continue };
        let branches: Vec<&str> =
            words.iter().map(String::as_str).filter(|word| BRANCH_WORDS.contains(word)).collect();
        let matches = commands.iter().any(|command| {
            // A push of the current branch may push any branch, so it has the one named.
            let any_branch = command.push.as_ref().is_some_and(Push::of_unknown_branch);
            let matched = words
                .iter()
                .filter(|word| {
                    command.words.contains(word)
                        || (any_branch && branches.contains(&word.as_str()))
                })
                .count();
            command.words.contains(first)
                && matched >= words.len().min(2)
                && pushes_to(command, &branches)
        });
        if matches {
            return Some(words.join(" "));
        }
    }
    None
}

/// The programs a prohibition names as alternatives (`npm or yarn`, `npm, yarn or bun`,
/// `neither npm nor yarn`), up to a `use`/`instead`; empty when the clause is not a list of
/// single program names.
pub(super) fn alternatives(clause: &str) -> Vec<&str> {
    let clause = clause.trim().trim_end_matches(['.', '!', ';']);
    // "don't use npm, …": the verb is not one of the tools.
    let clause = ["use ", "run ", "call "]
        .iter()
        .find_map(|verb| clause.strip_prefix(verb))
        .unwrap_or(clause);
    let lower = clause.to_ascii_lowercase();
    let end = [" use ", " instead", " but "]
        .iter()
        .filter_map(|stop| lower.find(stop))
        .min()
        .unwrap_or(clause.len());
    let mut parts = Vec::new();
    for part in clause[..end]
        .split(',')
        .flat_map(|part| part.split(" or "))
        .flat_map(|part| part.split(" nor "))
    {
        let part = part.trim().trim_start_matches("or ").trim_start_matches("neither ");
        let mut words = part.split_whitespace();
        let Some(tool) = words.next() else { return Vec::new() };
        let tool = tool.trim_matches(|c: char| c == '`' || c == '"' || c == '\'');
        let filler = |word: &str| FILLER_WORDS.contains(&word.to_ascii_lowercase().as_str());
        if tool.is_empty()
            || !tool.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || !words.all(filler)
        {
            return Vec::new();
        }
        parts.push(tool);
    }
    parts
}

/// Words that may follow the last tool of a list (`… or bun here`).
const FILLER_WORDS: &[&str] =
    &["here", "in", "this", "the", "repo", "repository", "project", "anymore", "again", "ever"];

/// The sentences of a memory: split at `;`, `!`, line ends, and at `.` before a space or the
/// end, never inside backticks (so `` `config/prod.yaml` `` stays whole).
fn sentences(memory: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut in_backticks = false;
    let mut chars = memory.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let ends = match c {
            '`' => {
                in_backticks = !in_backticks;
                false
            }
            ';' | '!' | '\n' => !in_backticks,
            '.' => !in_backticks && chars.peek().is_none_or(|(_, next)| next.is_whitespace()),
            _ => false,
        };
        if ends {
            sentences.push(&memory[start..at]);
            start = at + c.len_utf8();
        }
    }
    sentences.push(&memory[start..]);
    sentences
}

/// Whether a rule naming `branches` applies to the command: always, unless it is a push
/// that names its branches and none of them. A push naming none pushes the current branch,
/// which may be any, so the rule applies.
fn pushes_to(command: &CommandWords, branches: &[&str]) -> bool {
    let Some(push) = &command.push else { return true };
    if branches.is_empty() || push.of_unknown_branch() {
        return true;
    }
    push.branches.iter().chain(&push.deleted).any(|target| {
        let target = target.to_lowercase();
        branches.iter().any(|branch| target == *branch || target.starts_with(&format!("{branch}/")))
    })
}

/// Whether one of `commands` runs the backticked command `quoted`: the same program with
/// the same operands in order and the same flags (`-rf` and `-r -f` alike). A single quoted
/// word may also be an argument (`vim config/prod.yaml` for `config/prod.yaml`).
fn runs_quoted(commands: &[CommandWords], quoted: &str) -> bool {
    let script = shell::parse(quoted);
    let Some(wanted) = script.commands.iter().find(|command| !command.argv.is_empty()) else {
        return false;
    };
    let program = wanted.program().to_lowercase();
    let wanted_args: Vec<String> =
        wanted.args().iter().map(|word| word.text.to_lowercase()).collect();
    let whole = wanted.argv.first().map(|word| word.text.to_lowercase()).unwrap_or_default();
    commands.iter().any(|command| {
        let Some((have_program, have_args)) = command.argv.split_first() else { return false };
        if wanted_args.is_empty() {
            return *have_program == program
                || (!command.prints_text && have_args.contains(&whole));
        }
        *have_program == program && has_arguments(have_args, &wanted_args)
    })
}

/// Long flags and the short letters that usually mean the same.
const FLAG_SYNONYMS: &[(char, &str)] = &[('f', "--force"), ('r', "--recursive")];

fn has_arguments(have: &[String], wanted: &[String]) -> bool {
    let (have_flags, have_operands): (Vec<&String>, Vec<&String>) =
        have.iter().partition(|arg| arg.starts_with('-') && arg.len() > 1);
    let (wanted_flags, wanted_operands): (Vec<&String>, Vec<&String>) =
        wanted.iter().partition(|arg| arg.starts_with('-') && arg.len() > 1);
    let short_letters: String = have_flags
        .iter()
        .filter(|flag| !flag.starts_with("--"))
        .flat_map(|flag| flag.chars().skip(1))
        .collect();
    let has_long = |name: &str| have_flags.iter().any(|flag| flag.split('=').next() == Some(name));
    let flags_present = wanted_flags.iter().all(|flag| {
        if flag.starts_with("--") {
            let name = flag.split('=').next().unwrap_or(flag);
            has_long(name)
                || FLAG_SYNONYMS
                    .iter()
                    .any(|(letter, long)| *long == name && short_letters.contains(*letter))
        } else {
            flag.chars().skip(1).all(|letter| {
                short_letters.contains(letter)
                    || FLAG_SYNONYMS.iter().any(|(short, long)| *short == letter && has_long(long))
            })
        }
    });
    let mut remaining = have_operands.iter();
    let operands_in_order =
        wanted_operands.iter().all(|wanted| remaining.any(|have| have == wanted));
    flags_present && operands_in_order
}
