//! Where a shell or an interpreter takes its code from: `-c` strings, script operands,
//! standard input, and interpreters' inline programs.

use super::{Language, SHELLS, Word, file_name};

/// What runs code: a shell or an interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reader {
    Shell,
    Interpreter(Language),
}

/// Where a shell or interpreter takes its code from.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Code {
    /// An argument: `bash -c CODE`, `python -c CODE`.
    Inline { text: String, downloads: bool },
    /// A file named by the argument at this index: `bash install.sh`, `bash <(curl …)`.
    Operand(usize),
    /// Standard input: `bash`, `sh -s`, `python3 -`.
    Stdin,
    /// No code to read: `python -m module`.
    Nothing,
}

pub(super) fn code_source(argv: &[Word]) -> Option<(Reader, Code)> {
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
