//! How one command runs another: runners (`sudo`, `env`, `xargs`, …) taken off the front of
//! a command, and the code it runs (`eval`, `su -c`, `ssh`, `find -exec`) read as commands.

use super::code::{Code, Reader, code_source};
use super::parser::{Output, Place, parse_text};
use super::{
    Command, Inline, MAX_DEPTH, RESERVED_WORDS, Redirect, SHELLS, SSH_VALUE_OPTIONS, Word,
    file_name,
};

/// Makes a command of `words`: takes assignments, reserved words and runners off the front,
/// and reads the code it runs (`bash -c`, `eval`, `find -exec`, `python -c`, …). Past
/// [`MAX_DEPTH`] nothing is read further: the code words stay arguments.
pub(super) fn build(
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
