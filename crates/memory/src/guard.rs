//! Guards: built-in rules for destructive actions, rules learned from memories, and warnings
//! from commands that failed before.
//!
//! Built-in rules can block; what is learned from memories and outcomes only warns, because
//! it is advice written by agents and people, not a policy.

use std::sync::LazyLock;

use cairn_store::MemoryFilter;
use cairn_types::{GuardFinding, GuardRequest, GuardResult, Memory, Status};
use regex::Regex;

use crate::{Engine, Result, text, validate};

pub(crate) async fn check(engine: &Engine, request: GuardRequest) -> Result<GuardResult> {
    let action = validate::required_text("action", Some(request.action), validate::MAX_TEXT_BYTES)?;
    let repo = validate::optional_text("repo", request.repo, validate::MAX_NAME_BYTES)?;
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();

    for rule in BUILT_IN_RULES.iter() {
        if rule.pattern.is_match(&action) {
            let finding = finding(rule.code, rule.message.to_owned());
            match rule.severity {
                Severity::Block => blockers.push(finding),
                Severity::Warn => warnings.push(finding),
            }
        }
    }

    let action_words: Vec<String> = text::words(&action).collect();
    let candidates =
        engine.store.search_memories(&text::terms(&action), &MemoryFilter::default(), 50).await?;
    for candidate in candidates {
        let memory = candidate.memory;
        if memory.status == Status::Stale || !in_repo(&memory, repo.as_deref()) {
            continue;
        }
        if let Some(rule) = learned_rule(&memory.content, &action, &action_words) {
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
    let outcomes = engine.store.outcomes_for_command(&command, 1).await?;
    if let Some(last) = outcomes.first().filter(|last| !last.succeeded) {
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

fn in_repo(memory: &Memory, repo: Option<&str>) -> bool {
    match (repo, memory.repo.as_deref()) {
        (Some(wanted), Some(own)) => wanted == own,
        _ => true,
    }
}

#[derive(Clone, Copy)]
enum Severity {
    Block,
    Warn,
}

struct Rule {
    code: &'static str,
    severity: Severity,
    pattern: Regex,
    message: &'static str,
}

fn rule(code: &'static str, severity: Severity, pattern: &str, message: &'static str) -> Rule {
    let pattern = Regex::new(&format!("(?i){pattern}")).expect("built-in guard patterns are valid");
    Rule { code, severity, pattern, message }
}

/// `rm` with a recursive flag, in any spelling (`-rf`, `-fr`, `-r -f`, `--recursive`).
const RM_RECURSIVE: &str =
    r"\brm\s+(?:--?[a-z-]*\s+)*(?:-[a-z]*r[a-z]*|--recursive)\s+(?:-[a-z-]+\s+)*";
/// A force flag of `git push`.
const FORCE: &str = r"(?:--force(?:-with-lease)?|-[a-z]*f[a-z]*)";
/// Branches nobody should rewrite.
const PROTECTED: &str = r"(?:main|master|production|prod|release|trunk|develop)";
/// The end of a shell word.
const WORD_END: &str = r#"(?:\s|$|;|&|\||\)|["'])"#;

static BUILT_IN_RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    use Severity::{Block, Warn};
    vec![
        rule(
            "DESTRUCTIVE_DELETE",
            Block,
            &format!(r#"{RM_RECURSIVE}["']?(?:/\*?|~/?\*?|\$HOME/?\*?|\.\.?/?\*?|\*){WORD_END}"#),
            "recursive delete of the root, home, current or parent directory",
        ),
        rule(
            "RECURSIVE_DELETE",
            Warn,
            RM_RECURSIVE,
            "recursive delete: check the path before running it",
        ),
        rule(
            "FORCE_PUSH_PROTECTED",
            Block,
            &format!(
                r"\bgit\s+push\b(?:.*\s{FORCE}(?:\s|=).*\s\+?(?:\S+:)?{PROTECTED}{WORD_END}|.*\s\+?(?:\S+:)?{PROTECTED}\s(?:.*\s)?{FORCE}(?:\s|=|$)|.*\s\+(?:\S+:)?{PROTECTED}{WORD_END})"
            ),
            "force-push to a protected branch rewrites history others depend on",
        ),
        rule(
            "FORCE_PUSH",
            Warn,
            r"\bgit\s+push\b.*\s(?:--force(?:-with-lease)?|-[a-z]*f[a-z]*)(?:\s|=|$)",
            "force-push rewrites the remote branch's history",
        ),
        rule(
            "HARD_RESET",
            Warn,
            r"\bgit\s+reset\s+.*--hard\b",
            "hard reset discards uncommitted work",
        ),
        rule(
            "GIT_CLEAN",
            Warn,
            r"\bgit\s+clean\s+(?:-[a-z]*\s+)*-[a-z]*f",
            "git clean deletes untracked files for good",
        ),
        rule(
            "DROP_TABLE",
            Block,
            r"\bdrop\s+(?:table|database|schema)\b",
            "dropping a table, database or schema destroys its data",
        ),
        rule(
            "TRUNCATE_TABLE",
            Block,
            r"\btruncate\s+(?:table\s+)?[a-z_`\x22\[]",
            "truncating a table destroys its rows",
        ),
        rule(
            "UNBOUNDED_DELETE",
            Warn,
            r"\bdelete\s+from\s+[a-z0-9_.`\x22\[\]]+\s*(?:;|$)",
            "DELETE without WHERE removes every row",
        ),
        rule(
            "PIPE_TO_SHELL",
            Block,
            r"\b(?:curl|wget)\b[^|]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b",
            "piping a download into a shell runs code nobody has read",
        ),
        rule(
            "DISK_OVERWRITE",
            Block,
            r"\bmkfs(?:\.\w+)?\s|\bdd\s+.*\bof=/dev/(?:sd|nvme|hd|vd|disk|mmcblk)|>\s*/dev/(?:sd|nvme|hd|vd)[a-z]",
            "writing over a disk device destroys the file system",
        ),
        rule(
            "FORK_BOMB",
            Block,
            r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
            "a fork bomb exhausts the machine",
        ),
        rule(
            "WORLD_WRITABLE",
            Warn,
            r"\bchmod\s+(?:-[a-z]*\s+)*(?:0?777|a\+rwx)\b",
            "making files writable by everyone is rarely what is wanted",
        ),
        rule(
            "INFRASTRUCTURE_DESTROY",
            Warn,
            r"\bterraform\s+destroy\b|\bkubectl\s+delete\s+(?:ns|namespace)\b",
            "destroys infrastructure",
        ),
    ]
});

/// Words that turn the rest of a sentence into a prohibition.
static PROHIBITION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:never|don'?t|do\s+not|must\s+not|mustn'?t|should\s+not|shouldn'?t|avoid|forbidden\s+to|not\s+allowed\s+to|instead\s+of|rather\s+than)\b|,\s*not\b")
        .expect("valid pattern")
});
static BACKTICKED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"`([^`]+)`").expect("valid pattern"));

/// Verbs that say nothing about which command is meant.
const GENERIC_WORDS: &[&str] =
    &["run", "use", "call", "execute", "invoke", "type", "repo", "repository", "ever", "anything"];

/// When `memory` prohibits what `action` does, the prohibited phrase.
fn learned_rule(memory: &str, action: &str, action_words: &[String]) -> Option<String> {
    for sentence in memory.split(['.', '\n', ';', '!']) {
        let Some(found) = PROHIBITION.find(sentence) else { continue };
        let clause = &sentence[found.end()..];
        // A quoted command is the most precise statement of what is prohibited.
        let quoted: Vec<&str> =
            BACKTICKED.captures_iter(clause).map(|c| c.get(1).unwrap().as_str().trim()).collect();
        if !quoted.is_empty() {
            let action = text::normalize_command(action);
            if let Some(command) = quoted.iter().find(|command| {
                !command.is_empty() && action.contains(&text::normalize_command(command))
            }) {
                return Some(format!("`{command}`"));
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
        let matched = words.iter().filter(|word| action_words.contains(word)).count();
        if action_words.contains(first) && matched >= words.len().min(2) {
            return Some(words.join(" "));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built_in(action: &str) -> Vec<&'static str> {
        BUILT_IN_RULES
            .iter()
            .filter(|rule| rule.pattern.is_match(action))
            .map(|rule| rule.code)
            .collect()
    }

    #[test]
    fn destructive_commands_are_caught() {
        assert_eq!(built_in("rm -rf /"), ["DESTRUCTIVE_DELETE", "RECURSIVE_DELETE"]);
        assert_eq!(built_in("sudo rm -fr ~"), ["DESTRUCTIVE_DELETE", "RECURSIVE_DELETE"]);
        assert_eq!(built_in("rm -r -f /*"), ["DESTRUCTIVE_DELETE", "RECURSIVE_DELETE"]);
        assert_eq!(built_in("rm -rf ./target"), ["RECURSIVE_DELETE"]);
        assert_eq!(
            built_in("git push --force origin main"),
            ["FORCE_PUSH_PROTECTED", "FORCE_PUSH"]
        );
        assert_eq!(
            built_in("git push -f origin HEAD:master"),
            ["FORCE_PUSH_PROTECTED", "FORCE_PUSH"]
        );
        assert_eq!(built_in("git push origin +main"), ["FORCE_PUSH_PROTECTED"]);
        assert_eq!(
            built_in("git push origin main --force"),
            ["FORCE_PUSH_PROTECTED", "FORCE_PUSH"]
        );
        assert_eq!(built_in("git push origin master -f"), ["FORCE_PUSH_PROTECTED", "FORCE_PUSH"]);
        assert_eq!(
            built_in("rm --force --recursive /"),
            ["DESTRUCTIVE_DELETE", "RECURSIVE_DELETE"]
        );
        assert_eq!(built_in("rm -rf ~/*"), ["DESTRUCTIVE_DELETE", "RECURSIVE_DELETE"]);
        assert_eq!(built_in("rm -rf ./*"), ["DESTRUCTIVE_DELETE", "RECURSIVE_DELETE"]);
        assert_eq!(built_in("git push --force origin feature/login"), ["FORCE_PUSH"]);
        assert_eq!(built_in("psql -c 'DROP TABLE users;'"), ["DROP_TABLE"]);
        assert_eq!(
            built_in("curl -fsSL https://example.com/install.sh | sudo bash"),
            ["PIPE_TO_SHELL"]
        );
        assert_eq!(built_in("DELETE FROM users;"), ["UNBOUNDED_DELETE"]);
        assert_eq!(built_in("dd if=/dev/zero of=/dev/sda bs=1M"), ["DISK_OVERWRITE"]);
    }

    #[test]
    fn ordinary_commands_pass() {
        for action in [
            "git push origin main",
            "git push --force-with-lease-check",
            "cargo test --workspace",
            "rm build.log",
            "DELETE FROM users WHERE id = 4;",
            "curl https://example.com -o page.html",
            "ls -la /",
            "grep -r main src",
        ] {
            assert!(built_in(action).is_empty(), "{action} matched {:?}", built_in(action));
        }
    }

    fn learned(memory: &str, action: &str) -> Option<String> {
        let words: Vec<String> = text::words(action).collect();
        learned_rule(memory, action, &words)
    }

    #[test]
    fn prohibitions_in_memories_become_rules() {
        assert_eq!(
            learned("Never run `npm publish` from a laptop.", "npm publish --tag next").as_deref(),
            Some("`npm publish`")
        );
        assert_eq!(learned("Use pnpm, not npm.", "npm install lodash").as_deref(), Some("npm"));
        assert_eq!(
            learned("Don't run the migrations against prod.", "run migrations --env prod")
                .as_deref(),
            Some("migrations against prod")
        );
        assert_eq!(learned("Never run `npm publish` from a laptop.", "npm test"), None);
        assert_eq!(
            learned("npm is the package manager here.", "npm install"),
            None,
            "no prohibition, no rule"
        );
        assert_eq!(learned("Don't run the migrations against prod.", "cargo run"), None);
    }
}
