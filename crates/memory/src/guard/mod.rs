//! Guards: built-in rules for destructive actions, rules learned from memories, and warnings
//! from commands that failed before.
//!
//! The built-in rules judge the commands an action runs, as [`crate::shell`] reads them: `rm
//! -rf /` is blocked wherever it runs (after `sudo`, inside `bash -c`, `$(…)`, `find -exec` or
//! a `python -c` program's `os.system`), while `echo "rm -rf /"` only prints text and passes.
//! SQL, given as the action itself or to `psql -c`, `mysql -e` and the like, is read as SQL.
//! Built-in rules can block; what is learned from memories and outcomes only warns, because
//! it is advice written by agents and people, not a policy.
//!
//! Verdicts, by rule (a blocker makes `allowed` false; a warning asks for a second look):
//!
//! - Recursive `rm` (and `find -delete`, `find -exec rm`, `find … | xargs rm`, and an
//!   interpreter's `shutil.rmtree`, `FileUtils.rm_rf`, `fs.rmSync`, …) of `/`, a home
//!   directory, a top-level system directory or the current or parent directory (`.`, `..`,
//!   `*`): block, `DESTRUCTIVE_DELETE`; `rm --no-preserve-root` always blocks. Of a path
//!   outside the project (absolute, `..`, under `~`, or built from a variable): warn,
//!   `RECURSIVE_DELETE`. Of a path inside the project (`node_modules`, `./target`) or under
//!   `/tmp/`: nothing. `find . -delete` blocks like `rm -rf .`, but with a name or age filter
//!   (`find . -name '*.pyc' -delete`) it is fine.
//! - `chmod -R`, `chown -R`, `chgrp -R` of `/`, a home or a system directory: block,
//!   `SYSTEM_PERMISSIONS`; `chmod` to a world-writable mode elsewhere: warn, `WORLD_WRITABLE`.
//! - `dd of=/dev/sd…`, `mkfs`, `wipefs`, `shred` of a disk, `> /dev/sda`: block,
//!   `DISK_OVERWRITE`. A function that calls itself twice (`:(){ :|:& };:`): block, `FORK_BOMB`.
//! - `git push` forced (`--force`, `-f`, `--force-with-lease`, `+branch`, `--mirror`) to a
//!   protected branch (main, master, trunk, develop, production, prod, release*): block,
//!   `FORCE_PUSH_PROTECTED`; a protected branch deleted: block, `DELETE_PROTECTED_BRANCH`.
//!   Forced to another branch: warn, `FORCE_PUSH` (a feature branch is usually one person's).
//!   Forced with no branch named: warn, `FORCE_PUSH`, because the current branch cannot be
//!   known from the text and may be protected. `git reset --hard`: warn, `HARD_RESET`;
//!   `git clean -f…`: warn, `GIT_CLEAN`; `git checkout -- .`, `git restore .`, `git stash
//!   clear|drop`: warn, `DISCARD_CHANGES`.
//! - `terraform destroy`, `kubectl delete namespace`, `pulumi destroy`: warn,
//!   `INFRASTRUCTURE_DESTROY`; `kubectl delete` of volumes or stateful sets and `helm
//!   uninstall`: warn, `CLUSTER_DELETE`.
//! - SQL: `DROP TABLE|DATABASE|SCHEMA` and `dropdb`: block, `DROP_TABLE`; `TRUNCATE`: block,
//!   `TRUNCATE_TABLE`; `DELETE FROM x` without `WHERE`: warn, `UNBOUNDED_DELETE`.
//! - A download run as code (`curl … | sh`, `bash <(curl …)`, `sh -c "$(curl …)"`): block,
//!   `PIPE_TO_SHELL`. Reading a download (`cat <(curl …)`, `curl … | jq`) is fine.
//! - `docker system prune -a`, `docker volume prune`: warn,
//!   `DOCKER_PRUNE`. They are everyday operations somewhere, so they ask rather than refuse.
//! - `shutdown`, `reboot`, `halt`, `poweroff`, `init 0`: warn, `SHUTDOWN`.
//! - Nesting past the parser's depth: warn, `NESTING_TOO_DEEP` (the rest is still checked
//!   word by word).
//! - The tools that delete at scale, by family (`families.rs`): cloud deletes
//!   (`CLOUD_DELETE`), database resets through ORMs and frameworks (`DATABASE_RESET`),
//!   container volumes and host mounts (`VOLUME_DELETE`, `HOST_MOUNT`), process and scheduler wipes
//!   (`PROCESS_WIPE`, `SCHEDULE_WIPE`), PowerShell's and `cmd`'s deletes of a drive, a system
//!   directory or a home, and decoded payloads run as code (`DECODED_PAYLOAD`). The action is
//!   read again as a shell would run it (`$IFS` between words, `$(echo rm)`) and as
//!   PowerShell would (backslashes in `C:\\Users`). `tests/data/guard-verdicts.tsv` is the
//!   coverage as data.
//!
//! Learned rules compare what a memory prohibits with each command the action runs, not with
//! the text it passes around (`echo`, `grep` patterns, commit messages). A rule naming a
//! branch ("Never force-push to main") applies to pushes to that branch, and to pushes that
//! name no branch, since the current branch may be it.

use std::collections::{HashMap, HashSet};

use cairn_store::MemoryFilter;
use cairn_types::{GuardFinding, GuardRequest, GuardResult, Status};

use crate::shell::{self, Command, RedirectKind, Script, Word};

mod families;
mod git;
mod infrastructure;
mod inline;
mod learned;
mod paths;
mod sql;
use crate::{Engine, Result, privacy, text, validate};
use git::check_git;
use infrastructure::{check_infrastructure, check_power};
use inline::check_inline;
use learned::{command_words, learned_rule};
use paths::{
    SYSTEM_DIRECTORIES, Target, check_dd, check_disk_tool, check_find, check_permissions, check_rm,
    classify, is_disk,
};
use sql::{check_sql, client_sql, looks_like_sql};

/// What the built-in rules alone say about `action`: no store, no memories, no outcomes. The
/// CLI's hooks and `cairn guard` fall back on it when the daemon cannot answer in time, so
/// a guard never fails open on what the built-in rules block.
pub fn built_in_verdict(action: &str) -> GuardResult {
    verdict_of(action, &shell::parse(action))
}

/// [`built_in_verdict`] of `action`, already read as `script`.
fn verdict_of(action: &str, script: &Script) -> GuardResult {
    let (mut warnings, mut blockers) = (Vec::new(), Vec::new());
    for found in built_in_findings(action, script) {
        let finding = finding(found.code, found.message);
        match found.severity {
            Severity::Block => blockers.push(finding),
            Severity::Warn => warnings.push(finding),
        }
    }
    GuardResult { allowed: blockers.is_empty(), warnings, blockers }
}

pub(crate) async fn check(engine: &Engine, request: GuardRequest) -> Result<GuardResult> {
    let action = validate::required_text("action", Some(request.action), validate::MAX_TEXT_BYTES)?;
    let repo = validate::optional_text("repo", request.repo, validate::MAX_NAME_BYTES)?;
    let script = shell::parse(&action);
    let GuardResult { mut warnings, blockers, .. } = verdict_of(&action, &script);

    let commands = command_words(&script);
    let candidates =
        engine.store.search_memories(&text::terms(&action), &MemoryFilter::default(), 50).await?;
    // Memories that say the same (stored twice, by two agents) warn once.
    let mut said = HashSet::new();
    for candidate in candidates {
        let memory = candidate.memory;
        // The one repository rule; and what a conversation's visitor said is no one's rule.
        if memory.status == Status::Stale
            || !crate::repo_admits(repo.as_deref(), memory.repo.as_deref())
            || privacy::owners(&memory).next().is_some()
        {
            continue;
        }
        if let Some(rule) = learned_rule(&memory.content, &commands) {
            if !said.insert(text::words(&memory.content).collect::<Vec<_>>()) {
                continue;
            }
            warnings.push(GuardFinding {
                memory_id: Some(memory.id.clone()),
                ..finding(
                    "MEMORY_RULE",
                    format!("A memory warns against this ({rule}): {}", memory.content.trim()),
                )
            });
        }
    }

    let command = text::normalize_command(&action);
    // The last run in this repository (or with none named): another repository's failure
    // says nothing here.
    let outcomes = engine.store.outcomes_for_command(&command, RECENT_OUTCOMES).await?;
    let last = outcomes
        .iter()
        .find(|outcome| crate::repo_admits(repo.as_deref(), outcome.repo.as_deref()));
    if let Some(last) = last.filter(|last| !last.succeeded) {
        let times = last.previous_failures + 1;
        warnings.push(GuardFinding {
            outcome_id: Some(last.outcome_id.clone()),
            ..finding(
                "PREVIOUSLY_FAILED",
                format!(
                    "`{command}` failed the last time it ran (exit code {} at {}; {times} recorded failure{})",
                    last.exit_code,
                    last.recorded_at,
                    if times == 1 { "" } else { "s" }
                ),
            )
        });
    }

    Ok(GuardResult { allowed: blockers.is_empty(), warnings, blockers })
}

fn finding(code: &str, message: String) -> GuardFinding {
    GuardFinding { code: code.to_owned(), message, memory_id: None, outcome_id: None }
}

/// How many of a command's newest outcomes are looked through for the last one in the
/// request's repository.
const RECENT_OUTCOMES: u32 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Severity {
    Block,
    Warn,
}

/// What a built-in rule found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Found {
    code: &'static str,
    severity: Severity,
    message: String,
}

/// The built-in rules' findings, each reported once, in the order found.
#[derive(Default)]
struct Findings {
    found: Vec<Found>,
    seen: HashSet<Found>,
}

impl Findings {
    fn block(&mut self, code: &'static str, message: String) {
        self.add(Found { code, severity: Severity::Block, message });
    }

    fn warn(&mut self, code: &'static str, message: String) {
        self.add(Found { code, severity: Severity::Warn, message });
    }

    fn has(&self, code: &str) -> bool {
        self.found.iter().any(|found| found.code == code)
    }

    fn add(&mut self, found: Found) {
        if self.seen.insert(found.clone()) {
            self.found.push(found);
        }
    }
}

/// What the built-in rules say about `action`, read as `script`.
fn built_in_findings(action: &str, script: &Script) -> Vec<Found> {
    let mut findings = Findings::default();
    if looks_like_sql(action) {
        check_sql(action, &mut findings);
    }
    check_script(script, 0, &mut findings);
    families::check_decoded(script, &mut findings);
    // `rm${IFS}-rf${IFS}/`, `$(echo rm) -rf /`: the words a shell would run, read again.
    // Read again as a shell would run it (`$IFS`, printed words) and as PowerShell or `cmd`
    // would (backslashes in Windows paths), when the first reading found nothing to block.
    for again in [families::unmasked(action), families::windows_view(action)].into_iter().flatten()
    {
        if !findings.found.iter().any(|found| found.severity == Severity::Block) {
            check_script(&shell::parse(&again), 0, &mut findings);
        }
    }
    if script.unbalanced {
        // A quote or bracket left open may hide how the text was meant to split: look at its
        // words again without quoting.
        check_script(&shell::parse_words(action), 0, &mut findings);
    }
    if script.too_deep {
        findings.warn(
            "NESTING_TOO_DEEP",
            format!(
                "the command nests substitutions or shells more than {} deep; the innermost part was only checked word by word",
                shell::MAX_DEPTH
            ),
        );
    }
    findings.found
}

fn check_script(script: &Script, depth: usize, findings: &mut Findings) {
    for command in &script.commands {
        check_command(command, script, depth, findings);
    }
    // One download run as code is reason enough. The outermost command is named: it comes
    // after the commands nested in it (`sh -c "$(curl …)"` runs the download twice over).
    let download = script.commands.iter().rev().find(|command| command.runs_download);
    if let Some(command) = download
        && !findings.has("PIPE_TO_SHELL")
    {
        findings.block(
            "PIPE_TO_SHELL",
            format!(
                "`{}` runs code straight from a download, code nobody has read",
                command.display()
            ),
        );
    }
    if has_fork_bomb(script) {
        findings.block(
            "FORK_BOMB",
            "a function that calls itself twice (a fork bomb) exhausts the machine".to_owned(),
        );
    }
}

fn check_command(command: &Command, script: &Script, depth: usize, findings: &mut Findings) {
    let program = command.program().to_ascii_lowercase();
    match program.as_str() {
        "rm" => check_rm(command, findings),
        "find" => check_find(command, script, findings),
        "chmod" | "chown" | "chgrp" => check_permissions(&program, command, findings),
        "dd" => check_dd(command, findings),
        "mke2fs" | "mkswap" | "wipefs" | "shred" | "blkdiscard" => {
            check_disk_tool(command, findings)
        }
        formatter if formatter.starts_with("mkfs") => check_disk_tool(command, findings),
        "git" => check_git(command, findings),
        "psql" | "mysql" | "mariadb" | "sqlite3" => {
            for sql in client_sql(&program, command) {
                check_sql(&sql, findings);
            }
        }
        "dropdb" => findings.block(
            "DROP_TABLE",
            format!("`{}` drops a whole database and all its data", command.display()),
        ),
        "kubectl" | "helm" | "terraform" | "tofu" | "pulumi" => {
            check_infrastructure(&program, command, findings);
        }
        "shutdown" | "reboot" | "halt" | "poweroff" | "init" | "telinit" | "systemctl" => {
            check_power(&program, command, findings);
        }
        _ => {}
    }
    families::check(command, findings);
    for redirect in &command.redirects {
        if redirect.kind == RedirectKind::Write && is_disk(&redirect.target.text) {
            findings.block(
                "DISK_OVERWRITE",
                format!(
                    "writing to `{}` overwrites the disk and destroys its file system",
                    redirect.target.text
                ),
            );
        }
    }
    if let Some(inline) = &command.inline {
        check_inline(command, inline, depth, findings);
    }
}

/// A command's options and operands: `--` ends the options, and `-` alone is an operand.
struct Arguments<'a> {
    options: Vec<&'a str>,
    operands: Vec<&'a str>,
}

impl Arguments<'_> {
    fn read(words: &[Word]) -> Arguments<'_> {
        let mut arguments = Arguments { options: Vec::new(), operands: Vec::new() };
        let mut options_done = false;
        for word in words {
            let text = word.text.as_str();
            if text == "--" && !options_done {
                options_done = true;
            } else if options_done || text == "-" || !text.starts_with('-') {
                arguments.operands.push(text);
            } else {
                arguments.options.push(text);
            }
        }
        arguments
    }

    /// A short option, alone or in a group: `short('f')` for `-f`, `-rf`, `-fr`.
    fn short(&self, letter: char) -> bool {
        self.options.iter().any(|option| {
            !option.starts_with("--")
                && option.strip_prefix('-').is_some_and(|letters| letters.contains(letter))
        })
    }

    /// A long option, with or without `=value`.
    fn long(&self, name: &str) -> bool {
        self.options.iter().any(|option| {
            option.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
        })
    }
}

/// The arguments that are not options, skipping the values of `value_options`.
fn positionals<'a>(args: &'a [Word], value_options: &[&str]) -> Vec<&'a str> {
    operands(args.iter().map(|word| word.text.as_str()), value_options)
}

/// The words that are not options nor the values of `value_options` (`-n prod`).
fn operands<'a>(words: impl IntoIterator<Item = &'a str>, value_options: &[&str]) -> Vec<&'a str> {
    let mut operands = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        if value_options.contains(&word) {
            words.next();
        } else if !word.starts_with('-') {
            operands.push(word);
        }
    }
    operands
}

/// A function whose body calls it twice without arguments, as `:(){ :|:& };:` does.
fn has_fork_bomb(script: &Script) -> bool {
    let mut self_calls: HashMap<&str, usize> = HashMap::new();
    for command in &script.commands {
        if let Some(function) = &command.function
            && command.argv.len() == 1
            && command.program() == function
        {
            *self_calls.entry(function).or_default() += 1;
        }
    }
    self_calls.values().any(|&calls| calls >= 2)
}

#[cfg(test)]
mod tests;
