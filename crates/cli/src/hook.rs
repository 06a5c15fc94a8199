//! `cairn hook pre-tool-use` and `cairn hook post-tool-use`: agent hooks in Claude Code's
//! format (Codex CLI speaks the same), for shell commands.
//!
//! Before a command runs, its guard is asked: a blocker refuses it (exit 2, the reason on
//! stderr, which the agent reads as the denial); warnings go to the agent as additional
//! context. After it ran (`PostToolUse` for a success, `PostToolUseFailure` for a failure,
//! whose `error` starts with `Exit code N`), its outcome is recorded, so a command that
//! failed warns the next time. Cairn's own failure (daemon down, a timeout, a payload it
//! cannot read) never blocks the agent: it says so on stderr and allows.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use cairn_client::types::{ContextRequest, GuardRequest, OutcomeRequest};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::ClientArgs;
use crate::memories::describe;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum HookCommand {
    /// Before a tool runs: asks the guard about shell commands; exit 2 blocks.
    PreToolUse(HookArgs),
    /// After a tool ran (PostToolUse or PostToolUseFailure): records the command's outcome.
    PostToolUse(HookArgs),
    /// When a session starts (SessionStart): the repository's standing rules and what its
    /// memories say, as the hook's `additionalContext`.
    SessionStart(ContextHookArgs),
    /// When the user submits a prompt (UserPromptSubmit): a context pack for the prompt as
    /// the task, as the hook's `additionalContext`.
    UserPromptSubmit(ContextHookArgs),
    /// Writes Cairn's hooks and MCP server into an agent's settings (merged, idempotent).
    Install(crate::install::InstallArgs),
    /// Removes exactly what `install` writes.
    Uninstall(crate::install::InstallArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ContextHookArgs {
    /// The most tokens (o200k) the context may take.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    budget: u32,
    #[command(flatten)]
    hook: HookArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    /// The repository the commands belong to [default: the name of the git root of the
    /// hook's `cwd`].
    #[arg(long, env = "CAIRN_REPO")]
    repo: Option<String>,
    /// How long to wait for the daemon; past it (or with the daemon down) the built-in
    /// rules are checked here, without the daemon, and still block what they block.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    #[command(flatten)]
    client: ClientArgs,
}

/// The parts of a hook event Cairn reads; everything else is ignored, as new fields appear.
#[derive(Debug, Default, Deserialize)]
struct HookEvent {
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_input: Value,
    #[serde(default)]
    tool_response: Value,
    /// PostToolUseFailure: what went wrong; for shells, `Exit code N` then the output.
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    is_interrupt: Option<bool>,
    #[serde(default)]
    cwd: Option<String>,
    /// UserPromptSubmit: what the user asked.
    #[serde(default)]
    prompt: Option<String>,
}

/// The tools whose input is a shell command.
const SHELL_TOOLS: &[&str] = &["Bash", "PowerShell", "shell", "local_shell", "exec_command"];

pub(crate) async fn run(command: HookCommand) -> anyhow::Result<ExitCode> {
    let (before, args) = match command {
        HookCommand::PreToolUse(args) => (true, args),
        HookCommand::PostToolUse(args) => (false, args),
        HookCommand::SessionStart(args) => return Ok(context_hook(args, "SessionStart").await),
        HookCommand::UserPromptSubmit(args) => {
            return Ok(context_hook(args, "UserPromptSubmit").await);
        }
        HookCommand::Install(args) => return crate::install::install(&args),
        HookCommand::Uninstall(args) => return crate::install::uninstall(&args),
    };
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        return Ok(allow(&format!("cannot read the hook event: {error}")));
    }
    let event: HookEvent = match serde_json::from_str(&input) {
        Ok(event) => event,
        Err(error) => {
            return Ok(allow(&format!("the hook event is not JSON it can read: {error}")));
        }
    };
    let Some(command) = shell_command(&event) else { return Ok(ExitCode::SUCCESS) };
    let command = command.as_str();
    let repo = args.repo.clone().or_else(|| event.cwd.as_deref().and_then(repo_here));
    if before {
        return Ok(pre_tool_use(&args, command, repo).await);
    }
    let client = match args.client.connect_within(args.timeout) {
        Ok(client) => client,
        Err(error) => return Ok(allow(&format!("{error:#}"))),
    };
    let Some(exit_code) = exit_code(&event) else { return Ok(ExitCode::SUCCESS) };
    let outcome = OutcomeRequest { command: command.to_owned(), exit_code, task: None, repo };
    if let Err(error) = client.record_outcome(&outcome).await {
        eprintln!("cairn: the outcome was not recorded: {error}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a context pack for the session or the prompt as the hook's `additionalContext`
/// (Claude Code's `hookSpecificOutput`), within the budget; nothing when memory has nothing
/// to add. Never in the agent's way: a daemon that cannot answer is a line on stderr, exit 0.
async fn context_hook(args: ContextHookArgs, event_name: &str) -> ExitCode {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("cairn: cannot read the hook event: {error}");
        return ExitCode::SUCCESS;
    }
    let event: HookEvent = serde_json::from_str(&input).unwrap_or_default();
    let repo = args.hook.repo.clone().or_else(|| event.cwd.as_deref().and_then(repo_here));
    let task = match event_name {
        "UserPromptSubmit" => match event.prompt.as_deref().map(str::trim) {
            Some(prompt) if !prompt.is_empty() => prompt.to_owned(),
            _ => return ExitCode::SUCCESS,
        },
        _ => match &repo {
            Some(repo) => format!(
                "working in repository {repo}: its rules, conventions, commands and what failed before"
            ),
            None => "rules, conventions and preferences to follow".to_owned(),
        },
    };
    let request = ContextRequest { task, repo: repo.clone(), token_budget: Some(args.budget) };
    let pack = match args.hook.client.connect_within(args.hook.timeout) {
        Ok(client) => client.context(&request).await.map_err(|error| error.to_string()),
        Err(error) => Err(format!("{error:#}")),
    };
    let pack = match pack {
        Ok(pack) => pack,
        Err(reason) => {
            eprintln!("cairn: no memory was added to the session: {reason}");
            return ExitCode::SUCCESS;
        }
    };
    if pack.memories_used == 0 {
        return ExitCode::SUCCESS;
    }
    let heading = match &repo {
        Some(repo) => format!("What Cairn remembers for repository {repo}:"),
        None => "What Cairn remembers:".to_owned(),
    };
    let output = json!({
        "hookSpecificOutput": {
            "hookEventName": event_name,
            "additionalContext": format!("{heading}\n{}", pack.context),
        }
    });
    println!("{output}");
    ExitCode::SUCCESS
}

/// Asks the guard about `command` before it runs: exit 2 (the blockers on stderr) when it is
/// blocked; its warnings as the hook's `additionalContext`. A daemon that is down, slow or
/// failing is no reason to let `rm -rf /` through: the built-in rules, which live in this
/// binary too, are checked here then, and block what they block; the output says the rules
/// learned from memories and outcomes were not consulted.
async fn pre_tool_use(args: &HookArgs, command: &str, repo: Option<String>) -> ExitCode {
    let request = GuardRequest { action: command.to_owned(), repo };
    let (verdict, note) = crate::memories::verdict(&args.client, args.timeout, &request).await;
    if !verdict.allowed {
        for blocker in &verdict.blockers {
            eprintln!("Cairn blocked this command: {}", describe(blocker));
        }
        if let Some(note) = &note {
            eprintln!("cairn: {note}");
        }
        return ExitCode::from(2);
    }
    if let Some(note) = &note {
        eprintln!("cairn: {note}");
    }
    if !verdict.warnings.is_empty() {
        let warnings: Vec<String> = verdict.warnings.iter().map(describe).collect();
        let mut context = format!("Cairn warns about `{command}`: {}", warnings.join("; "));
        if let Some(note) = &note {
            context.push_str(&format!(" ({note})"));
        }
        let output = json!({
            "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": context}
        });
        println!("{output}");
    }
    ExitCode::SUCCESS
}

/// Lets the tool run, saying why Cairn could not help.
fn allow(reason: &str) -> ExitCode {
    eprintln!("cairn: {reason}; the command is allowed without a guard check");
    ExitCode::SUCCESS
}

/// The command line a shell tool is about to run: `command` or `cmd` (Codex), a string, or an
/// argument vector joined as a shell would quote it, so the guard sees the whole line (`rm`,
/// `-rf`, `/`), not one part of it.
fn shell_command(event: &HookEvent) -> Option<String> {
    let tool = event.tool_name.as_deref()?;
    if !SHELL_TOOLS.contains(&tool) {
        return None;
    }
    let input = &event.tool_input;
    let given = if input["command"].is_null() { &input["cmd"] } else { &input["command"] };
    let command = match given {
        Value::String(command) => command.clone(),
        Value::Array(parts) => {
            let words: Option<Vec<&str>> = parts.iter().map(Value::as_str).collect();
            shlex::try_join(words?).ok()?
        }
        _ => return None,
    };
    Some(command).filter(|command| !command.trim().is_empty())
}

/// How the command ended: 0 for a success; for a failure, the `Exit code N` of its error
/// (1 when the error has none); `None` when it was interrupted, which says nothing about
/// the command.
fn exit_code(event: &HookEvent) -> Option<i32> {
    if event.is_interrupt == Some(true) || event.tool_response["interrupted"] == true {
        return None;
    }
    // Agents that report the code themselves (Codex's tool responses may carry it).
    for key in ["exit_code", "exitCode", "returncode"] {
        if let Some(code) = event.tool_response[key].as_i64() {
            return i32::try_from(code).ok();
        }
    }
    if event.hook_event_name.as_deref() == Some("PostToolUseFailure") || event.error.is_some() {
        let first_line =
            event.error.as_deref().unwrap_or_default().lines().next().unwrap_or_default();
        let code =
            first_line.trim().strip_prefix("Exit code ").and_then(|code| code.trim().parse().ok());
        return Some(code.unwrap_or(1));
    }
    Some(0)
}

/// The repository `cwd` is in, by the one rule (`cairn_memory::repo_identity`).
fn repo_here(cwd: &str) -> Option<String> {
    cairn_memory::repo_identity(Path::new(cwd)).map(|(name, _, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(value: Value) -> HookEvent {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn exit_codes_from_successes_failures_and_interruptions() {
        let success = event(json!({"hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_response": {"stdout": "", "stderr": "", "interrupted": false, "isImage": false}}));
        assert_eq!(exit_code(&success), Some(0));
        let failure = event(json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "error": "Exit code 2\nmake: *** [deploy] Error 2", "is_interrupt": false}));
        assert_eq!(exit_code(&failure), Some(2));
        let unstarted =
            event(json!({"hook_event_name": "PostToolUseFailure", "error": "spawn failed"}));
        assert_eq!(exit_code(&unstarted), Some(1));
        let interrupted =
            event(json!({"hook_event_name": "PostToolUseFailure", "is_interrupt": true}));
        assert_eq!(exit_code(&interrupted), None);
        let codex =
            event(json!({"hook_event_name": "PostToolUse", "tool_response": {"exit_code": 3}}));
        assert_eq!(exit_code(&codex), Some(3));
    }

    #[test]
    fn only_shell_commands_are_checked() {
        let write = event(json!({"tool_name": "Write", "tool_input": {"file_path": "a"}}));
        assert_eq!(shell_command(&write), None);
        let bash = event(json!({"tool_name": "Bash", "tool_input": {"command": "ls"}}));
        assert_eq!(shell_command(&bash).as_deref(), Some("ls"));
        let argv = event(
            json!({"tool_name": "shell", "tool_input": {"command": ["bash", "-lc", "ls -la /"]}}),
        );
        assert_eq!(shell_command(&argv).as_deref(), Some("bash -lc 'ls -la /'"));
        let rm = event(
            json!({"tool_name": "local_shell", "tool_input": {"command": ["rm", "-rf", "/"]}}),
        );
        assert_eq!(shell_command(&rm).as_deref(), Some("rm -rf /"));
        let cmd = event(json!({"tool_name": "exec_command", "tool_input": {"cmd": "rm -rf ~"}}));
        assert_eq!(shell_command(&cmd).as_deref(), Some("rm -rf ~"));
        let not_words = event(json!({"tool_name": "shell", "tool_input": {"command": ["rm", 1]}}));
        assert_eq!(shell_command(&not_words), None);
    }
}
