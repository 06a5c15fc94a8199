//! The rules for `git`: forced pushes and deletes of protected branches, and the commands
//! that throw uncommitted work away.

use super::{Arguments, Findings, positionals};
use crate::shell::{Command, Word};

/// `git`'s subcommand and its arguments, after global options such as `-C dir`.
fn git_subcommand(args: &[Word]) -> Option<(&str, &[Word])> {
    let mut index = 0;
    while let Some(word) = args.get(index) {
        match word.text.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" => index += 2,
            option if option.starts_with('-') => index += 1,
            subcommand => return Some((subcommand, args.get(index + 1..).unwrap_or_default())),
        }
    }
    None
}

pub(super) fn check_git(command: &Command, findings: &mut Findings) {
    let Some((subcommand, args)) = git_subcommand(command.args()) else { return };
    let display = command.display();
    match subcommand {
        "push" => check_push(&display, &read_push(args), findings),
        "reset" if args.iter().any(|word| word.text == "--hard") => {
            findings.warn("HARD_RESET", format!("`{display}` discards uncommitted work"));
        }
        "clean" => {
            let arguments = Arguments::read(args);
            let forced = arguments.short('f') || arguments.long("--force");
            let dry_run = arguments.short('n') || arguments.long("--dry-run");
            if forced && !dry_run {
                findings.warn("GIT_CLEAN", format!("`{display}` deletes untracked files for good"));
            }
        }
        "checkout" | "restore" | "stash" if discards_work(subcommand, args) => {
            findings
                .warn("DISCARD_CHANGES", format!("`{display}` discards uncommitted work for good"));
        }
        _ => {}
    }
}

/// `git checkout -- .`, `git restore .`, `git stash clear`/`drop`: uncommitted work thrown
/// away, with no copy kept.
fn discards_work(subcommand: &str, args: &[Word]) -> bool {
    let has = |flag: &str| args.iter().any(|word| word.text == flag);
    let paths = positionals(args, &[]);
    let whole_tree = paths.iter().any(|path| matches!(*path, "." | ":/" | "*" | "./" | ":(top)"));
    match subcommand {
        "checkout" => (has("--") && whole_tree) || paths == ["."],
        // `--staged` alone restores the index, not the work tree.
        "restore" => whole_tree && (!has("--staged") || has("--worktree")),
        "stash" => matches!(paths.first(), Some(&("clear" | "drop"))),
        _ => false,
    }
}

/// What a `git push` sends: whether it forces, and to which branches.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Push {
    pub(super) forced: bool,
    /// The remote branches named by its refspecs.
    pub(super) branches: Vec<String>,
    /// No refspec or `HEAD`: the current branch, whatever it is.
    current_branch: bool,
    /// `--all`, `--mirror`.
    every_branch: bool,
    pub(super) deleted: Vec<String>,
}

impl Push {
    /// The text does not say which branches it pushes: the current one, or every one.
    pub(super) fn of_unknown_branch(&self) -> bool {
        self.current_branch || self.every_branch
    }
}

/// The push of a `git push` command.
pub(super) fn git_push(command: &Command) -> Option<Push> {
    if !command.program().eq_ignore_ascii_case("git") {
        return None;
    }
    let (subcommand, args) = git_subcommand(command.args())?;
    (subcommand == "push").then(|| read_push(args))
}

fn read_push(args: &[Word]) -> Push {
    let mut push = Push::default();
    let mut delete = false;
    let mut operands = Vec::new();
    let mut options_done = false;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let text = word.text.as_str();
        if options_done || text == "-" || !text.starts_with('-') {
            operands.push(text);
            continue;
        }
        match text {
            "--" => options_done = true,
            "--force" => push.forced = true,
            "--delete" => delete = true,
            "--mirror" => {
                push.forced = true;
                push.every_branch = true;
            }
            "--all" | "--branches" => push.every_branch = true,
            "--repo" | "--receive-pack" | "--exec" | "--push-option" => {
                words.next();
            }
            long if long.starts_with("--") => {
                let lease = long.strip_prefix("--force-with-lease");
                push.forced |= lease.is_some_and(|rest| rest.is_empty() || rest.starts_with('='));
            }
            short => {
                let letters = short.trim_start_matches('-');
                push.forced |= letters.contains('f');
                delete |= letters.contains('d');
                if letters.ends_with('o') {
                    words.next();
                }
            }
        }
    }
    let refspecs = operands.get(1..).unwrap_or_default();
    push.current_branch = refspecs.is_empty() && !push.every_branch;
    for refspec in refspecs {
        let (plus, refspec) = match refspec.strip_prefix('+') {
            Some(refspec) => (true, refspec),
            None => (false, *refspec),
        };
        push.forced |= plus;
        let (source, destination) = refspec.split_once(':').unwrap_or((refspec, refspec));
        let branch = destination.strip_prefix("refs/heads/").unwrap_or(destination);
        if delete || source.is_empty() {
            push.deleted.push(branch.to_owned());
        } else if matches!(branch, "HEAD" | "@" | "") {
            push.current_branch = true;
        } else if !branch.starts_with("refs/") {
            push.branches.push(branch.to_owned());
        }
    }
    push
}

/// Branches nobody should rewrite: main, master, trunk, develop, production, prod, release*.
fn is_protected(branch: &str) -> bool {
    const PROTECTED: &[&str] = &["main", "master", "trunk", "develop", "production", "prod"];
    let branch = branch.to_ascii_lowercase();
    PROTECTED.contains(&branch.as_str()) || branch.starts_with("release")
}

fn check_push(display: &str, push: &Push, findings: &mut Findings) {
    for branch in push.deleted.iter().filter(|branch| is_protected(branch)) {
        findings.block(
            "DELETE_PROTECTED_BRANCH",
            format!("`{display}` deletes the protected branch `{branch}`"),
        );
    }
    if !push.forced {
        return;
    }
    // Protected branches block; others warn: a feature branch is usually one person's. With
    // no branch named, the current branch is pushed, and the text cannot tell which it is.
    if push.every_branch {
        findings.block(
            "FORCE_PUSH_PROTECTED",
            format!("`{display}` force-pushes every branch, main included, rewriting history others depend on"),
        );
    } else if let Some(branch) = push.branches.iter().find(|branch| is_protected(branch)) {
        findings.block(
            "FORCE_PUSH_PROTECTED",
            format!("`{display}` force-pushes to `{branch}`, rewriting history others depend on"),
        );
    } else if push.current_branch {
        findings.warn(
            "FORCE_PUSH",
            format!(
                "`{display}` force-pushes the current branch, rewriting its remote history: not if it is main, master or a release branch"
            ),
        );
    } else {
        findings.warn(
            "FORCE_PUSH",
            format!("`{display}` rewrites the remote history of `{}`", push.branches.join("`, `")),
        );
    }
}
