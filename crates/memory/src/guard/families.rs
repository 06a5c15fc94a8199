//! The guard's rules for the tools that delete at scale, by family rather than by string:
//! cloud command lines, ORMs and frameworks that reset databases, container
//! volumes and host mounts, process and scheduler wipes,
//! PowerShell's and `cmd`'s deletes, and decoded payloads run as code. A blocker where the
//! action cannot be undone; a warning where it is destructive but scoped.

use super::{Arguments, Findings, Target, classify, operands, positionals};
use crate::shell::{Command, Script, file_name};

/// Runners that run a tool named by their first argument (`npx prisma …`, `bundle exec
/// rails …`, `poetry run alembic …`), and interpreters that run a script (`python
/// manage.py …`).
fn tool_and_args(command: &Command) -> (String, Vec<&str>) {
    let mut words: Vec<&str> = command.argv.iter().map(|word| word.text.as_str()).collect();
    loop {
        let Some(first) = words.first() else { return (String::new(), words) };
        let program = file_name(first).to_ascii_lowercase();
        let skip = match (program.as_str(), words.get(1).copied()) {
            ("npx" | "bunx" | "pnpx", _) => 1,
            // `yarn prisma …`: a package's binary run by name.
            ("pnpm" | "yarn" | "bun", Some(bin)) if RUN_BY_NAME.contains(&bin) => 1,
            ("pnpm" | "yarn" | "bun", Some("exec" | "dlx" | "run")) => 2,
            ("bundle" | "poetry" | "uv" | "pipenv" | "pdm" | "hatch", Some("exec" | "run")) => 2,
            ("python" | "python3" | "ruby" | "php" | "node", Some(script))
                if !script.starts_with('-') =>
            {
                1
            }
            _ => 0,
        };
        if skip == 0 || words.len() <= skip {
            return (program, words[1..].to_vec());
        }
        // Options of the runner (`npx -y prisma`) are skipped too.
        words.drain(..skip);
        while words.first().is_some_and(|word| word.starts_with('-')) {
            words.remove(0);
        }
    }
}

/// Tools a package manager runs by name (`yarn prisma …`).
const RUN_BY_NAME: &[&str] =
    &["prisma", "knex", "sequelize", "sequelize-cli", "typeorm", "rails", "rake", "alembic"];

/// Options of the cloud command lines that take a value (`--profile prod`).
const CLOUD_VALUE_OPTIONS: &[&str] = &[
    "--profile",
    "--region",
    "--output",
    "--endpoint-url",
    "--query",
    "--project",
    "--account",
    "--subscription",
    "--configuration",
    "-o",
    "-n",
    "--name",
    "-g",
    "--resource-group",
];

pub(super) fn check(command: &Command, findings: &mut Findings) {
    let (tool, args) = tool_and_args(command);
    let display = command.display();
    let has =
        |flag: &str| args.iter().any(|arg| *arg == flag || arg.starts_with(&format!("{flag}=")));
    let positional = operands(args.iter().copied(), &[]);
    match tool.as_str() {
        "aws" => check_aws(
            &display,
            &operands(args.iter().copied(), CLOUD_VALUE_OPTIONS),
            &has,
            findings,
        ),
        "gsutil" => {
            let recursive = args.iter().any(|arg| matches!(*arg, "-r" | "-R" | "-rf" | "-fr"));
            if positional.contains(&"rb") || (positional.contains(&"rm") && recursive) {
                block_cloud(findings, &display, "deletes a bucket's objects for good");
            }
        }
        "gcloud" if positional.contains(&"delete") => {
            let vital = ["projects", "sql", "buckets", "spanner", "bigtable", "filestore"];
            if positional.iter().any(|operand| vital.contains(operand)) {
                block_cloud(findings, &display, "deletes a project or a database for good");
            } else {
                warn(findings, "CLOUD_DELETE", &display, "deletes cloud resources");
            }
        }
        "az" if positional.contains(&"delete") => {
            if positional.starts_with(&["group", "delete"]) || positional.contains(&"sql") {
                block_cloud(findings, &display, "deletes a resource group or a database for good");
            } else {
                warn(findings, "CLOUD_DELETE", &display, "deletes cloud resources");
            }
        }
        "prisma"
            if positional.starts_with(&["migrate", "reset"])
                || (positional.starts_with(&["db", "push"]) && has("--force-reset")) =>
        {
            block_reset(findings, &display);
        }
        "rails" | "rake" | "rails.rb"
            if positional.iter().any(|task| {
                matches!(
                    *task,
                    "db:drop"
                        | "db:reset"
                        | "db:purge"
                        | "db:migrate:reset"
                        | "db:schema:load"
                        | "db:drop:all"
                )
            }) =>
        {
            block_reset(findings, &display);
        }
        "manage.py" | "django-admin" | "django-admin.py"
            if matches!(positional.first(), Some(&("flush" | "reset_db" | "sqlflush"))) =>
        {
            block_reset(findings, &display);
        }
        "alembic" if positional.starts_with(&["downgrade", "base"]) => {
            block_reset(findings, &display)
        }
        "knex" if positional.first() == Some(&"migrate:rollback") && has("--all") => {
            block_reset(findings, &display);
        }
        "sequelize" | "sequelize-cli"
            if matches!(positional.first(), Some(&("db:drop" | "db:migrate:undo:all"))) =>
        {
            block_reset(findings, &display);
        }
        "typeorm" | "typeorm-ts-node-commonjs" if positional.first() == Some(&"schema:drop") => {
            block_reset(findings, &display);
        }
        "redis-cli"
            if positional.iter().any(|word| {
                word.eq_ignore_ascii_case("flushall") || word.eq_ignore_ascii_case("flushdb")
            }) =>
        {
            block_reset(findings, &display);
        }
        "mongo" | "mongosh" if args.iter().any(|arg| arg.contains("dropDatabase")) => {
            block_reset(findings, &display);
        }
        "docker" | "podman" | "docker-compose" | "podman-compose" => {
            check_containers(&tool, command, findings);
        }
        "kill" => {
            // The signal comes first (`-9`, `-KILL`, `-s KILL`); `-1` after it is every
            // process the caller may signal.
            let mut targets = args.iter().copied().peekable();
            match targets.peek().copied() {
                Some("-s" | "-n" | "--signal") => {
                    targets.next();
                    targets.next();
                }
                Some("--") => {}
                Some(signal) if signal.starts_with('-') => {
                    targets.next();
                }
                _ => {}
            }
            if targets.any(|target| target == "-1") {
                findings.block(
                    "PROCESS_WIPE",
                    format!(
                        "`{display}` kills every process you may signal, this session's included"
                    ),
                );
            }
        }
        "killall5" => findings.block("PROCESS_WIPE", format!("`{display}` kills every process")),
        "pkill" | "killall" if has("-u") || has("--user") => {
            warn(findings, "PROCESS_WIPE", &display, "kills every process of a user");
        }
        "crontab"
            if args
                .iter()
                .any(|arg| arg.starts_with('-') && !arg.starts_with("--") && arg.contains('r')) =>
        {
            findings.block(
                "SCHEDULE_WIPE",
                format!("`{display}` removes every scheduled job, with no copy kept"),
            );
        }
        "remove-item" | "ri" | "del" | "erase" | "rd" | "rmdir" => {
            check_windows_delete(&display, &args, true, findings);
        }
        // PowerShell's `rm` alias; the Unix `rm` of Unix paths is `check_rm`'s.
        "rm" => check_windows_delete(&display, &args, false, findings),
        "cmd" | "cmd.exe" => {
            let at = args
                .iter()
                .position(|arg| arg.eq_ignore_ascii_case("/c") || arg.eq_ignore_ascii_case("/k"));
            if let Some(inner) = at.and_then(|at| args.get(at + 1..)) {
                match inner.first().map(|word| word.to_ascii_lowercase()).as_deref() {
                    Some("rd" | "rmdir" | "del" | "erase") => {
                        check_windows_delete(&display, &inner[1..], true, findings);
                    }
                    Some("format" | "diskpart") => findings
                        .block("DISK_OVERWRITE", format!("`{display}` erases a disk or a volume")),
                    _ => {}
                }
            }
        }
        "powershell" | "powershell.exe" | "pwsh" | "pwsh.exe" => {
            let mut words = args.iter();
            while let Some(arg) = words.next() {
                let lower = arg.to_ascii_lowercase();
                if lower.starts_with("-e")
                    && "-encodedcommand".starts_with(&lower)
                    && lower.len() > 1
                {
                    findings.block(
                        "DECODED_PAYLOAD",
                        format!(
                            "`{display}` runs an encoded script: what it runs cannot be checked"
                        ),
                    );
                    return;
                }
                if matches!(lower.as_str(), "-c" | "-command") {
                    let script: Vec<&str> = words.copied().collect();
                    super::check_script(&crate::shell::parse(&script.join(" ")), 1, findings);
                    return;
                }
            }
        }
        "format-volume" | "clear-disk" | "format" | "diskpart" => {
            findings.block("DISK_OVERWRITE", format!("`{display}` erases a disk or a volume"))
        }
        "truncate" if positional.iter().any(|path| is_system_path(path)) => {
            findings.block("DESTRUCTIVE_DELETE", format!("`{display}` empties a system file"));
        }
        "rsync" if args.iter().any(|arg| arg.starts_with("--delete")) => {
            match positional.last().map(|destination| classify(destination)) {
                Some(target) if target.is_vital() || target == Target::Here => findings.block(
                    "DESTRUCTIVE_DELETE",
                    format!("`{display}` deletes what its source lacks from {}", target.describe()),
                ),
                Some(Target::Inside) | None => {}
                Some(_) => warn(
                    findings,
                    "RECURSIVE_DELETE",
                    &display,
                    "deletes what its source lacks from the destination",
                ),
            }
        }
        "shred"
            if positional.iter().any(|path| is_system_path(path) || classify(path).is_vital()) =>
        {
            findings.block("DESTRUCTIVE_DELETE", format!("`{display}` overwrites system files"));
        }
        _ => {}
    }
}

/// `/`, or a path under a top-level system directory (`/etc/passwd`, `/usr/bin/x`).
fn is_system_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else { return false };
    let top = rest.split('/').next().unwrap_or_default();
    top.is_empty() || super::SYSTEM_DIRECTORIES.contains(&top)
}

fn warn(findings: &mut Findings, code: &'static str, display: &str, what: &str) {
    findings.warn(code, format!("`{display}` {what}"));
}

fn block_cloud(findings: &mut Findings, display: &str, what: &str) {
    findings.block("CLOUD_DELETE", format!("`{display}` {what}"));
}

fn block_reset(findings: &mut Findings, display: &str) {
    findings.block(
        "DATABASE_RESET",
        format!("`{display}` drops or empties a database and every row in it"),
    );
}

fn check_aws(
    display: &str,
    operands: &[&str],
    has: &dyn Fn(&str) -> bool,
    findings: &mut Findings,
) {
    match operands {
        ["s3", "rm", ..] if has("--recursive") => {
            block_cloud(findings, display, "deletes every object under the prefix for good");
        }
        ["s3", "rb", ..] if has("--force") => {
            block_cloud(findings, display, "deletes a bucket and every object in it");
        }
        [service, operation, ..]
            if operation.starts_with("delete-") || *operation == "terminate-instances" =>
        {
            let vital = matches!(
                (*service, *operation),
                ("rds" | "dynamodb" | "redshift" | "docdb" | "neptune" | "elasticache", _)
                    | ("s3api", "delete-bucket")
                    | ("ec2", "terminate-instances" | "delete-volume" | "delete-snapshot")
                    | ("cloudformation", "delete-stack")
                    | ("eks", "delete-cluster")
                    | ("kms", "schedule-key-deletion")
            );
            if vital {
                block_cloud(
                    findings,
                    display,
                    "deletes a database, disk, cluster or stack for good",
                );
            } else {
                warn(findings, "CLOUD_DELETE", display, "deletes cloud resources");
            }
        }
        _ => {}
    }
}

/// Containers: pruning, volumes deleted, and host directories mounted into a container.
fn check_containers(tool: &str, command: &Command, findings: &mut Findings) {
    let args = command.args();
    let display = command.display();
    let options = Arguments::read(args);
    let operands = positionals(args, &["-H", "--host", "--context", "-c", "--config", "-l"]);
    match operands.as_slice() {
        ["system", "prune", ..]
            if options.short('a') || options.long("--all") || options.long("--volumes") =>
        {
            let what = "deletes every unused image, container, network and build cache";
            warn(findings, "DOCKER_PRUNE", &display, what);
        }
        ["volume", "prune", ..] => {
            warn(findings, "DOCKER_PRUNE", &display, "deletes unused volumes and the data in them");
        }
        ["volume", "rm", ..] => {
            warn(findings, "VOLUME_DELETE", &display, "deletes volumes and the data in them");
        }
        _ => {}
    }
    let compose = tool.ends_with("-compose") || operands.first() == Some(&"compose");
    if compose && operands.contains(&"down") && (options.short('v') || options.long("--volumes")) {
        let what = "deletes the project's volumes and the data in them";
        warn(findings, "VOLUME_DELETE", &display, what);
    }
    if !matches!(operands.first(), Some(&("run" | "create"))) || compose {
        return;
    }
    // Host mounts: `-v /:/host`, `--volume=/etc:/etc`, `--mount type=bind,source=/,target=/h`.
    let mut words = args.iter().map(|word| word.text.as_str());
    while let Some(arg) = words.next() {
        let spec = match arg {
            "-v" | "--volume" | "--mount" => words.next().unwrap_or_default(),
            other => other
                .strip_prefix("--volume=")
                .or_else(|| other.strip_prefix("--mount="))
                .or_else(|| other.strip_prefix("-v").filter(|rest| rest.starts_with('/')))
                .unwrap_or_default(),
        };
        let source = match spec
            .split(',')
            .find_map(|part| part.strip_prefix("source=").or_else(|| part.strip_prefix("src=")))
        {
            Some(source) => source,
            None => spec.split(':').next().unwrap_or_default(),
        };
        if !source.starts_with('/') && !source.starts_with('~') && !source.starts_with('$') {
            continue;
        }
        let read_only = spec.ends_with(":ro") || spec.contains(",readonly") || spec.contains(",ro");
        match classify(source) {
            Target::Root if !read_only => findings.block(
                "HOST_MOUNT",
                format!("`{display}` gives a container write access to every file of the machine"),
            ),
            target if target.is_vital() && !read_only => warn(
                findings,
                "HOST_MOUNT",
                &display,
                &format!("gives a container write access to {}", target.describe()),
            ),
            _ => {}
        }
    }
}

/// PowerShell's `Remove-Item -Recurse` (and its aliases) and `cmd`'s `rd /s`, `del /s` of a
/// drive's root, a system directory or a home.
fn check_windows_delete(display: &str, args: &[&str], homes: bool, findings: &mut Findings) {
    let recursive = args.iter().any(|arg| {
        let lower = arg.to_ascii_lowercase();
        matches!(lower.as_str(), "-recurse" | "-r" | "/s" | "-rf" | "-fr")
            || (lower.starts_with("-recurse"))
    });
    if !recursive {
        return;
    }
    for path in args
        .iter()
        .filter(|arg| !arg.starts_with('-') && !arg.starts_with('/') || looks_windows(arg))
    {
        if let Some(target) = windows_target(path, homes) {
            findings
                .block("DESTRUCTIVE_DELETE", format!("`{display}` deletes {}", target.describe()));
            return;
        }
    }
}

fn looks_windows(path: &str) -> bool {
    path.len() >= 2 && path.as_bytes()[1] == b':'
}

/// Where a Windows path points, when it is vital: `C:\`, `C:\Windows`, `C:\Users\me`,
/// `$env:USERPROFILE`, `~`.
fn windows_target(path: &str, homes: bool) -> Option<Target> {
    let path = path.trim_matches(|c| c == '"' || c == '\'');
    let lower = path.to_ascii_lowercase().replace('/', "\\");
    let home = lower.starts_with("$env:userprofile")
        || lower.starts_with("%userprofile%")
        || (homes && (lower.starts_with("$home") || lower == "~"));
    if home {
        return Some(Target::Home);
    }
    if !looks_windows(&lower) {
        return None;
    }
    let rest: Vec<&str> = lower[2..]
        .split('\\')
        .filter(|part| !part.is_empty() && !part.chars().all(|c| c == '*'))
        .collect();
    match rest.as_slice() {
        [] => Some(Target::Root),
        ["windows" | "program files" | "program files (x86)" | "programdata" | "users"] => {
            Some(Target::System)
        }
        ["users", _] => Some(Target::Home),
        _ => None,
    }
}

/// A payload decoded and run as code: `echo … | base64 -d | sh`, `eval "$(… | base64
/// -d)"`, `bash -c "$(echo … | xxd -r -p)"`. What it runs cannot be read from the line.
pub(super) fn check_decoded(script: &Script, findings: &mut Findings) {
    let decodes = |command: &Command| {
        let args: Vec<&str> = command.args().iter().map(|word| word.text.as_str()).collect();
        match command.program() {
            "base64" | "base32" | "basenc" => {
                args.iter().any(|arg| matches!(*arg, "-d" | "--decode" | "-D"))
            }
            "xxd" => args.iter().any(|arg| arg.starts_with("-r")),
            "openssl" => args.contains(&"-d") || args.contains(&"-decode"),
            "uudecode" => true,
            _ => false,
        }
    };
    let runs_code = |command: &Command| {
        matches!(
            command.program(),
            "sh" | "bash"
                | "zsh"
                | "dash"
                | "ksh"
                | "fish"
                | "eval"
                | "source"
                | "."
                | "pwsh"
                | "powershell"
        )
    };
    for decoder in script.commands.iter().filter(|command| decodes(command)) {
        let piped_into_code = script.commands.iter().any(|command| {
            command.pipeline == decoder.pipeline
                && command.position > decoder.position
                && runs_code(command)
        });
        if piped_into_code {
            findings.block(
                "DECODED_PAYLOAD",
                format!(
                    "`{}` decodes a payload and runs it: what it runs cannot be checked",
                    decoder.display()
                ),
            );
            return;
        }
    }
    // `eval "$(… base64 -d …)"`, `sh -c "$(…)"`: code made from a decoded substitution.
    for command in script.commands.iter().filter(|command| runs_code(command)) {
        let text = command.argv.iter().map(|word| word.text.as_str()).collect::<Vec<_>>().join(" ");
        let decoded = [
            "base64 -d",
            "base64 --decode",
            "base64 -D",
            "xxd -r",
            "openssl enc -d",
            "openssl base64 -d",
        ]
        .iter()
        .any(|decoder| text.contains(decoder));
        if decoded && (text.contains("$(") || text.contains('`')) {
            findings.block(
                "DECODED_PAYLOAD",
                format!(
                    "`{}` runs a decoded payload: what it runs cannot be checked",
                    command.display()
                ),
            );
            return;
        }
    }
}

/// The action as PowerShell or `cmd` reads it, when it names a Windows path (`C:\\Users`):
/// a backslash there separates folders, where a POSIX shell would read it as an escape.
pub(super) fn windows_view(action: &str) -> Option<String> {
    let bytes = action.as_bytes();
    let names_drive = bytes
        .windows(3)
        .any(|window| window[0].is_ascii_alphabetic() && window[1] == b':' && window[2] == b'\\');
    names_drive.then(|| action.replace('\\', "/"))
}

/// The action with shell tricks that hide a command's words undone, to be checked again:
/// `$IFS` between words (`rm${IFS}-rf${IFS}/`) and a substitution that only prints a word
/// (`$(echo rm) -rf /`, `` `printf rm` ``). `None` when there is nothing to undo.
pub(super) fn unmasked(action: &str) -> Option<String> {
    let mut text = action.to_owned();
    for ifs in ["${IFS}", "$IFS"] {
        text = text.replace(ifs, " ");
    }
    text = PRINTED_WORD.replace_all(&text, "$1").into_owned();
    (text != action).then_some(text)
}

static PRINTED_WORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r#"(?:\$\(|`)\s*(?:echo|printf)\s+['"]?([A-Za-z0-9_./-]+)['"]?\s*(?:\)|`)"#)
        .expect("valid pattern")
});
