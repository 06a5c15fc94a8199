//! Reading a git repository: the checks on it, where its data lies, and one item per commit.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::parts::push_parts;
use super::{
    GIT_LOCATION_VARIABLES, MAX_LISTED_FILES, SourceError, SourceItem, check_folder, io_error,
};

/// Fails unless `repository` is the top directory of a git repository (or a bare repository)
/// whose HEAD has at least one commit. A directory inside a repository is not accepted, so a
/// plain folder never reads the history of a repository around it.
pub(crate) fn check_git(repository: &Path) -> Result<(), SourceError> {
    open_git(repository).map(|_| ())
}

/// One item per commit of HEAD, newest first, at most `max_commits` of them.
pub(crate) fn read_git(
    repository: &Path,
    max_commits: usize,
) -> Result<Vec<SourceItem>, SourceError> {
    let canonical = open_git(repository)?;
    if max_commits == 0 {
        return Ok(Vec::new());
    }
    let output = run(git(&canonical).args([
        "log",
        &format!("--max-count={max_commits}"),
        "--name-only",
        "--no-renames",
        "--no-color",
        "--date=short",
        // Fields end with unit separators and commits start with a record separator: control
        // characters that commit messages do not hold in practice, and that git quotes in paths.
        "--format=%x1e%H%x1f%an%x1f%ad%x1f%s%x1f%b%x1f",
        "HEAD",
        "--",
    ]))?;
    if !output.status.success() {
        return Err(SourceError::Git(repository.to_path_buf(), stderr_text(&output)));
    }
    Ok(parse_log(&String::from_utf8_lossy(&output.stdout)))
}

/// Where git reads a repository's data from, canonical: its git directory, the common one
/// (of a linked worktree), and the object directories its alternates borrow. A `.git` file
/// or an alternates file may point anywhere, so connector roots must hold these too.
pub(crate) fn git_locations(repository: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let output = run(git(repository).args([
        "rev-parse",
        "--absolute-git-dir",
        "--git-common-dir",
        "--git-path",
        "objects",
    ]))?;
    if !output.status.success() {
        return Err(SourceError::Git(repository.to_path_buf(), stderr_text(&output)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut locations = Vec::new();
    let mut objects = None;
    for (index, line) in text.lines().enumerate() {
        // Relative answers are relative to the repository (`-C`).
        let path = repository.join(line);
        let path = fs::canonicalize(&path).map_err(|error| io_error(&path, error))?;
        if index == 2 {
            objects = Some(path.clone());
        }
        locations.push(path);
    }
    // Alternates, recursively (git follows up to five levels), one directory per line.
    let mut pending: Vec<PathBuf> = objects.into_iter().collect();
    let mut depth = 0;
    while let Some(objects) = pending.pop() {
        let file = objects.join("info/alternates");
        let Ok(list) = fs::read_to_string(&file) else { continue };
        depth += 1;
        if depth > 32 {
            break;
        }
        for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let path = objects.join(line);
            let path = fs::canonicalize(&path).map_err(|error| io_error(&path, error))?;
            locations.push(path.clone());
            pending.push(path);
        }
    }
    Ok(locations)
}

/// Checks `repository` as [`check_git`] says, and returns its canonical path.
fn open_git(repository: &Path) -> Result<PathBuf, SourceError> {
    check_folder(repository)?;
    let canonical = fs::canonicalize(repository).map_err(|error| io_error(repository, error))?;
    let output = run(git(&canonical).args(["log", "--max-count=1", "--format=%H", "HEAD", "--"]))?;
    if output.status.success() {
        return Ok(canonical);
    }
    let is_repository = run(git(&canonical).args(["rev-parse", "--git-dir"]))?.status.success();
    if is_repository
        && !run(git(&canonical).args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]))?
            .status
            .success()
    {
        return Err(SourceError::EmptyRepository(repository.to_path_buf()));
    }
    Err(SourceError::NotAGitRepository(repository.to_path_buf(), stderr_text(&output)))
}

/// A git command on `repository` (a canonical path), isolated from the caller's git
/// environment and the system configuration, with output that does not depend on the locale.
fn git(repository: &Path) -> Command {
    let mut command = Command::new("git");
    command.arg("-C").arg(repository).args([
        "-c",
        "core.quotepath=off",
        "-c",
        "log.showSignature=false",
        "-c",
        "log.showRoot=true",
        "-c",
        "i18n.logOutputEncoding=UTF-8",
    ]);
    command.env("GIT_CONFIG_NOSYSTEM", "1").env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
    for variable in GIT_LOCATION_VARIABLES {
        command.env_remove(variable);
    }
    // Git looks for the repository in `repository` itself and never in the directories above.
    match repository.parent() {
        Some(parent) => command.env("GIT_CEILING_DIRECTORIES", parent),
        None => command.env_remove("GIT_CEILING_DIRECTORIES"),
    };
    command
}

fn run(command: &mut Command) -> Result<Output, SourceError> {
    command.output().map_err(SourceError::GitMissing)
}

/// Git's error output on one line without its `fatal: ` and `error: ` prefixes, or the exit
/// status when it wrote none.
pub(super) fn stderr_text(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(|line| {
            let line = line.trim();
            line.strip_prefix("fatal: ").or_else(|| line.strip_prefix("error: ")).unwrap_or(line)
        })
        .filter(|line| !line.is_empty())
        .collect();
    if lines.is_empty() { format!("git exited with {}", output.status) } else { lines.join(" ") }
}

/// The items of `git log`'s output in the format [`read_git`] asks for.
fn parse_log(output: &str) -> Vec<SourceItem> {
    let mut records: Vec<String> = Vec::new();
    for chunk in output.split('\x1e') {
        match records.last_mut() {
            // A record separator inside a commit message does not start a commit.
            Some(record) if !starts_with_sha(chunk) => {
                record.push('\x1e');
                record.push_str(chunk);
            }
            _ if starts_with_sha(chunk) => records.push(chunk.to_string()),
            _ => {}
        }
    }
    records.iter().flat_map(|record| commit_items(record)).collect()
}

/// Whether `record` starts with a full SHA-1 or SHA-256 commit id and a unit separator.
fn starts_with_sha(record: &str) -> bool {
    let Some((sha, _)) = record.split_once('\x1f') else {
        return false;
    };
    matches!(sha.len(), 40 | 64) && sha.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// One commit's items: its subject, its body, and the files it changed.
fn commit_items(record: &str) -> Vec<SourceItem> {
    let fields: Vec<&str> = record.splitn(5, '\x1f').collect();
    let [sha, author, date, subject, tail] = fields[..] else {
        return Vec::new();
    };
    let Some((body, files)) = tail.rsplit_once('\x1f') else {
        return Vec::new();
    };
    let files: Vec<&str> = files.lines().filter(|line| !line.trim().is_empty()).collect();

    let subject = match subject.trim() {
        "" => "(no commit message)",
        subject => subject,
    };
    let mut rest = body.trim().to_string();
    if !files.is_empty() {
        if !rest.is_empty() {
            rest.push_str("\n\n");
        }
        rest.push_str("Files: ");
        rest.push_str(&files.iter().take(MAX_LISTED_FILES).copied().collect::<Vec<_>>().join(", "));
        if files.len() > MAX_LISTED_FILES {
            rest.push_str(&format!(" and {} more", files.len() - MAX_LISTED_FILES));
        }
    }
    let author = match author.trim() {
        "" => "an unknown author",
        author => author,
    };
    let origin = format!("commit {} by {author} on {}", &sha[..7], date.trim());

    // A commit is one item unless its message is longer than an item holds; then its parts
    // follow one another, keyed `<sha>#part2` and on.
    let mut items = Vec::new();
    push_parts(&mut items, &mut HashSet::new(), sha, &origin, None, Some(subject), &rest);
    items
}
