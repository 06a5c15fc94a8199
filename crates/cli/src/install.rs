//! `cairn hook install --claude/--codex` and `cairn hook uninstall …`: Cairn's hooks and MCP
//! server written into Claude Code's or Codex's settings (the project's, or the user's with
//! `--user`), merged with what is there, idempotent, saying what changed; uninstall removes
//! exactly what install adds and nothing else.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Map, Value, json};

#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// Claude Code: hooks in `.claude/settings.json`, the MCP server in `.mcp.json`.
    #[arg(long)]
    claude: bool,
    /// Codex CLI: hooks in `.codex/hooks.json`, the MCP server in `.codex/config.toml`
    /// (`~/.codex/…` with `--user`).
    #[arg(long)]
    codex: bool,
    /// The user's settings (`~/.claude/settings.json`, `~/.claude.json`) instead of the
    /// project's.
    #[arg(long)]
    user: bool,
    /// The project [default: the git root above the current directory, else it].
    #[arg(long)]
    project: Option<PathBuf>,
}

/// A hook Cairn installs: the event, the tool matcher (none for session events), and the
/// command.
type Hook = (&'static str, Option<&'static str>, &'static str);

/// The hooks Cairn installs for Claude Code.
const HOOKS: &[Hook] = &[
    ("PreToolUse", Some("Bash"), "cairn hook pre-tool-use"),
    ("PostToolUse", Some("Bash"), "cairn hook post-tool-use"),
    ("PostToolUseFailure", Some("Bash"), "cairn hook post-tool-use"),
    ("SessionStart", None, "cairn hook session-start"),
    ("UserPromptSubmit", None, "cairn hook user-prompt-submit"),
];

/// Codex's hooks take Claude Code's JSON; it has no `PostToolUseFailure` (its
/// `PostToolUse` fires for failed commands too).
fn codex_hooks() -> impl Iterator<Item = &'static Hook> {
    HOOKS.iter().filter(|(event, _, _)| *event != "PostToolUseFailure")
}

/// Claude Code's limit on a hook, in seconds: above the hooks' own 2 s wait for the daemon.
const HOOK_TIMEOUT_SECONDS: u64 = 10;

fn mcp_server() -> Value {
    json!({"command": "cairn", "args": ["mcp"]})
}

/// The project: `--project`, else the git root above the current directory, else it.
fn project(args: &InstallArgs) -> anyhow::Result<PathBuf> {
    if let Some(project) = &args.project {
        return Ok(project.clone());
    }
    let here = std::env::current_dir()?;
    Ok(here.ancestors().find(|dir| dir.join(".git").exists()).unwrap_or(&here).to_owned())
}

fn home() -> anyhow::Result<PathBuf> {
    Ok(PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?))
}

/// Where the settings go: (hooks file, MCP file).
fn files(args: &InstallArgs) -> anyhow::Result<(PathBuf, PathBuf)> {
    if args.user {
        let home = home()?;
        return Ok((home.join(".claude/settings.json"), home.join(".claude.json")));
    }
    let project = project(args)?;
    Ok((project.join(".claude/settings.json"), project.join(".mcp.json")))
}

/// Codex's files: (hooks file, config file).
fn codex_files(args: &InstallArgs) -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = match args.user {
        true => home()?.join(".codex"),
        false => project(args)?.join(".codex"),
    };
    Ok((dir.join("hooks.json"), dir.join("config.toml")))
}

/// The table `install --codex` appends to Codex's config, exactly.
const CODEX_TABLE: &str = "[mcp_servers.cairn]\ncommand = \"cairn\"\nargs = [\"mcp\"]\n";
const CODEX_HEADER: &str = "[mcp_servers.cairn]";

fn install_codex(args: &InstallArgs, changed: &mut Vec<String>) -> anyhow::Result<()> {
    let (hooks_file, file) = codex_files(args)?;
    install_hooks(&hooks_file, codex_hooks(), changed)?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    if text.lines().any(|line| line.trim() == CODEX_HEADER) {
        return Ok(());
    }
    let mut updated = text.clone();
    if !updated.is_empty() && !updated.ends_with("\n\n") {
        updated.push_str(if updated.ends_with('\n') { "\n" } else { "\n\n" });
    }
    updated.push_str(CODEX_TABLE);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&file, updated).with_context(|| format!("cannot write {}", file.display()))?;
    changed.push(format!("{}: [mcp_servers.cairn]: cairn mcp", file.display()));
    Ok(())
}

/// Removes the table `install --codex` wrote, only while it is still exactly that.
fn uninstall_codex(args: &InstallArgs, changed: &mut Vec<String>) -> anyhow::Result<()> {
    let (hooks_file, file) = codex_files(args)?;
    uninstall_hooks(&hooks_file, codex_hooks(), changed)?;
    let Ok(text) = std::fs::read_to_string(&file) else { return Ok(()) };
    let Some(start) = text.find(CODEX_TABLE) else { return Ok(()) };
    let mut updated = format!("{}{}", &text[..start], &text[start + CODEX_TABLE.len()..]);
    while updated.ends_with("\n\n") {
        updated.pop();
    }
    std::fs::write(&file, updated).with_context(|| format!("cannot write {}", file.display()))?;
    changed.push(format!("{}: [mcp_servers.cairn]", file.display()));
    Ok(())
}

pub(crate) fn install(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.claude || args.codex, "say which agent: --claude, --codex, or both");
    let mut changed = Vec::new();
    if args.codex {
        install_codex(args, &mut changed)?;
    }
    if args.claude {
        install_claude(args, &mut changed)?;
    }
    report("added", &changed);
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn uninstall(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.claude || args.codex, "say which agent: --claude, --codex, or both");
    let mut changed = Vec::new();
    if args.codex {
        uninstall_codex(args, &mut changed)?;
    }
    if args.claude {
        uninstall_claude(args, &mut changed)?;
    }
    report("removed", &changed);
    Ok(ExitCode::SUCCESS)
}

/// Adds the hooks Claude Code lacks to its settings, and the MCP server when there is none.
fn install_claude(args: &InstallArgs, changed: &mut Vec<String>) -> anyhow::Result<()> {
    let (hooks_file, mcp_file) = files(args)?;
    install_hooks(&hooks_file, HOOKS.iter(), changed)?;
    let mut mcp = read(&mcp_file)?;
    let servers = object_at(&mut mcp, "mcpServers");
    if !servers.contains_key("cairn") {
        servers.insert("cairn".to_owned(), mcp_server());
        write(&mcp_file, &mcp)?;
        changed.push(format!("{}: mcpServers.cairn: cairn mcp", mcp_file.display()));
    }
    Ok(())
}

/// Removes the hooks `install_claude` adds, and its MCP server while it is still the one it
/// wrote.
fn uninstall_claude(args: &InstallArgs, changed: &mut Vec<String>) -> anyhow::Result<()> {
    let (hooks_file, mcp_file) = files(args)?;
    uninstall_hooks(&hooks_file, HOOKS.iter(), changed)?;
    if mcp_file.exists() {
        let mut mcp = read(&mcp_file)?;
        let servers = object_at(&mut mcp, "mcpServers");
        // Only the entry install writes: one the user changed is theirs now.
        if servers.get("cairn") == Some(&mcp_server()) {
            servers.remove("cairn");
            if servers.is_empty() {
                mcp.as_object_mut().expect("an object").remove("mcpServers");
            }
            write(&mcp_file, &mcp)?;
            changed.push(format!("{}: mcpServers.cairn", mcp_file.display()));
        }
    }
    Ok(())
}

/// Adds the `hooks` the settings in `file` lack (Claude Code's JSON, which Codex shares).
fn install_hooks<'a>(
    file: &Path,
    hooks: impl Iterator<Item = &'a Hook>,
    changed: &mut Vec<String>,
) -> anyhow::Result<()> {
    let mut settings = read(file)?;
    let mut added = false;
    for (event, matcher, command) in hooks {
        if add_hook(&mut settings, event, *matcher, command) {
            let on = matcher.map(|matcher| format!(" ({matcher})")).unwrap_or_default();
            changed.push(format!("{}: hooks.{event}{on}: {command}", file.display()));
            added = true;
        }
    }
    if added {
        write(file, &settings)?;
    }
    Ok(())
}

/// Removes the `hooks` from the settings in `file`, and nothing else.
fn uninstall_hooks<'a>(
    file: &Path,
    hooks: impl Iterator<Item = &'a Hook>,
    changed: &mut Vec<String>,
) -> anyhow::Result<()> {
    if !file.exists() {
        return Ok(());
    }
    let mut settings = read(file)?;
    let mut removed = false;
    for (event, matcher, command) in hooks {
        if remove_hook(&mut settings, event, *matcher, command) {
            changed.push(format!("{}: hooks.{event}: {command}", file.display()));
            removed = true;
        }
    }
    if removed {
        write(file, &settings)?;
    }
    Ok(())
}

fn report(what: &str, changed: &[String]) {
    if changed.is_empty() {
        println!(
            "nothing to change: Cairn's settings are {}",
            if what == "added" { "already there" } else { "not there" }
        );
    }
    for line in changed {
        println!("{what} {line}");
    }
}

/// The JSON object in `path`; an empty one when the file does not exist.
fn read(path: &Path) -> anyhow::Result<Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(json!({})),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON; it was left as it is", path.display()))?;
    anyhow::ensure!(
        value.is_object(),
        "{} does not hold a JSON object; it was left as it is",
        path.display()
    );
    Ok(value)
}

fn write(path: &Path, value: &Value) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(value)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The object under `key` of `value`, made when missing (or not an object).
fn object_at<'a>(value: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let object = value.as_object_mut().expect("settings are an object");
    let entry = object.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

fn is_ours(hook: &Value, command: &str) -> bool {
    hook["type"] == "command" && hook["command"] == command
}

/// Adds `command` for `event` (under a group with `matcher`) unless some group of the event
/// runs it already; true when added.
fn add_hook(settings: &mut Value, event: &str, matcher: Option<&str>, command: &str) -> bool {
    let hooks = object_at(settings, "hooks");
    let groups = hooks.entry(event).or_insert_with(|| json!([]));
    if !groups.is_array() {
        *groups = json!([]);
    }
    let groups = groups.as_array_mut().expect("an array");
    let present = groups.iter().any(|group| {
        group["hooks"]
            .as_array()
            .is_some_and(|hooks| hooks.iter().any(|hook| is_ours(hook, command)))
    });
    if present {
        return false;
    }
    let hook = json!({"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS});
    let mut group = json!({"hooks": [hook]});
    if let Some(matcher) = matcher {
        group["matcher"] = json!(matcher);
    }
    groups.push(group);
    true
}

/// Removes `command` from `event`'s groups, and a group or event it leaves empty; true when
/// something was removed.
fn remove_hook(settings: &mut Value, event: &str, matcher: Option<&str>, command: &str) -> bool {
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else {
        return false;
    };
    let Some(groups) = hooks.get_mut(event).and_then(Value::as_array_mut) else { return false };
    let mut removed = false;
    for group in groups.iter_mut() {
        if group.get("matcher").and_then(Value::as_str) != matcher {
            continue;
        }
        if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
            let before = list.len();
            list.retain(|hook| !is_ours(hook, command));
            removed |= list.len() != before;
        }
    }
    groups.retain(|group| group["hooks"].as_array().is_none_or(|hooks| !hooks.is_empty()));
    if groups.is_empty() {
        hooks.remove(event);
    }
    if hooks.is_empty() {
        settings.as_object_mut().expect("an object").remove("hooks");
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_gets_its_mcp_table_once_and_loses_only_that() {
        let project = tempfile::tempdir().unwrap();
        let file = project.path().join(".codex/config.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let theirs = "model = \"o4-mini\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
        std::fs::write(&file, theirs).unwrap();
        let args = InstallArgs {
            claude: false,
            codex: true,
            user: false,
            project: Some(project.path().to_owned()),
        };
        install(&args).unwrap();
        install(&args).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.matches(CODEX_HEADER).count(), 1, "{text}");
        assert!(text.starts_with(theirs), "{text}");
        let hooks_file = project.path().join(".codex/hooks.json");
        let hooks = read(&hooks_file).unwrap();
        assert_eq!(hooks["hooks"]["PreToolUse"][0]["matcher"], "Bash");
        assert_eq!(
            hooks["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "cairn hook pre-tool-use"
        );
        assert_eq!(hooks["hooks"]["SessionStart"][0]["hooks"].as_array().unwrap().len(), 1);
        assert!(hooks["hooks"].get("PostToolUseFailure").is_none(), "Codex has no such event");
        uninstall(&args).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs);
        assert_eq!(read(&hooks_file).unwrap(), json!({}), "only Cairn's hooks were there");
    }

    #[test]
    fn install_merges_once_and_uninstall_takes_back_exactly_that() {
        let mine = json!({
            "model": "opus",
            "hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "./lint.sh"}]}]}
        });
        let mut settings = mine.clone();
        for (event, matcher, command) in HOOKS {
            add_hook(&mut settings, event, *matcher, command);
        }
        let once = settings.clone();
        for (event, matcher, command) in HOOKS {
            assert!(!add_hook(&mut settings, event, *matcher, command), "idempotent");
        }
        assert_eq!(settings, once);
        assert_eq!(settings["hooks"]["PreToolUse"].as_array().unwrap().len(), 2, "theirs kept");
        assert_eq!(
            settings["hooks"]["SessionStart"][0]["hooks"][0]["command"],
            "cairn hook session-start"
        );
        for (event, matcher, command) in HOOKS {
            remove_hook(&mut settings, event, *matcher, command);
        }
        assert_eq!(settings, mine, "exactly what was added is gone");
    }
}
