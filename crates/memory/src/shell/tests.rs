//! Tests of the shell parser: separators, quoting, substitutions, here-documents, runners
//! and interpreters.

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
    assert_eq!(commands("echo \"$(whoami)\" `date`"), ["whoami", "date", "echo $(whoami) `date`"]);
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
