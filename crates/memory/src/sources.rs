//! The content Cairn's connectors import as memories: Markdown and text files in a folder, split
//! into sections at their headings, and the commits of a git repository.
//!
//! Every piece becomes a [`SourceItem`] whose key stays the same across syncs while the piece
//! exists, and whose content hash changes when its text does, so a connector can tell new,
//! changed and removed pieces apart. Reading is all or nothing: an unreadable file or folder
//! fails the whole read rather than leaving pieces out, because a connector would take a missing
//! piece for a removed one.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The largest `content` of one item, in bytes of UTF-8; longer pieces are split into parts.
pub(crate) const MAX_ITEM_BYTES: usize = 16 * 1024;
/// Files larger than this many bytes are skipped.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A commit's content names at most this many changed files.
const MAX_LISTED_FILES: usize = 50;
/// Headings longer than this many bytes are cut short in heading paths, keys and contents.
const MAX_HEADING_BYTES: usize = 200;

/// Directories never read, at any depth.
const SKIPPED_DIRECTORIES: &[&str] =
    &[".git", "node_modules", "target", "dist", "build", "vendor", ".venv"];
/// The hidden directories that are read; every other hidden directory is skipped.
const HIDDEN_DIRECTORIES_READ: &[&str] = &[".github", ".cursor", ".clinerules"];
/// Extensions of the files read as Markdown, compared without case.
const MARKDOWN_EXTENSIONS: &[&str] = &["md", "markdown", "mdx"];
/// Extensions of the files read as plain text, compared without case.
const TEXT_EXTENSIONS: &[&str] = &["txt", "rst"];
/// Agent rule files read as Markdown by their exact names.
const RULE_FILES: &[&str] = &[".cursorrules", ".windsurfrules", ".clinerules"];
/// Environment variables that would point git at another repository than the one asked for.
const GIT_LOCATION_VARIABLES: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/// One importable piece of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceItem {
    /// Stable identity within its source, unchanged across syncs while the piece exists
    /// (a file's relative path plus the section's heading path, or a commit's full SHA).
    pub key: String,
    /// The memory text (non-empty, at most 16 KiB; longer sections are split into parts with
    /// keys suffixed `#part2`, ...).
    pub content: String,
    /// Where it came from, for people: `docs/setup.md § Install > Linux` or `commit 1a2b3c4`.
    pub origin: String,
    /// Relative file path (folders) or None (git).
    pub path: Option<String>,
    /// A stable 64-bit hash of `content`, as 16 lower-case hex digits, to detect changes.
    pub content_hash: String,
}

impl SourceItem {
    fn new(key: String, content: String, origin: String, path: Option<&str>) -> SourceItem {
        let content_hash = format!("{:016x}", fnv1a64(content.as_bytes()));
        SourceItem { key, content, origin, path: path.map(str::to_string), content_hash }
    }
}

/// Why a source cannot be read. `Display` gives every detail, for the daemon's log;
/// [`SourceError::public_message`] what a client is told.
#[derive(Debug)]
pub(crate) enum SourceError {
    /// The path does not exist.
    NotFound(PathBuf),
    /// The path exists but is a file (or something else), not a directory.
    NotADirectory(PathBuf),
    /// The path (as given, then resolved) lies outside the folders connectors may read.
    OutsideRoots(PathBuf, PathBuf),
    /// The path is not a git repository with commits; the text says why, in git's words when
    /// git gave any.
    NotAGitRepository(PathBuf, String),
    /// The path is a git repository whose current branch has no commits yet.
    EmptyRepository(PathBuf),
    /// Reading this file or directory failed.
    Io(PathBuf, io::Error),
    /// Git could not be run at all.
    GitMissing(io::Error),
    /// Git failed on a repository that passed the checks: its error output.
    Git(PathBuf, String),
}

impl SourceError {
    /// What a client is told: what is wrong and what to do, in Cairn's words, never the
    /// operating system's or git's (those go to the daemon's log).
    pub(crate) fn public_message(&self) -> String {
        match self {
            SourceError::NotFound(path) => format!("`{}` does not exist", path.display()),
            SourceError::NotADirectory(path) => {
                format!("`{}` is not a directory", path.display())
            }
            SourceError::OutsideRoots(path, _) => format!(
                "`{}` is outside the folders this daemon lets connectors read; its owner can \
                 allow more with --connector-root (SERVICE_CONNECTOR_ROOTS)",
                path.display()
            ),
            SourceError::NotAGitRepository(path, _) => format!(
                "`{}` is not a git repository (give the top folder of a repository with commits)",
                path.display()
            ),
            SourceError::EmptyRepository(path) => format!(
                "`{}` is a git repository with no commits yet on its current branch",
                path.display()
            ),
            SourceError::Io(path, error) if error.kind() == io::ErrorKind::PermissionDenied => {
                format!(
                    "`{}` cannot be read: the daemon's account has no permission",
                    path.display()
                )
            }
            SourceError::Io(path, _) => {
                format!("`{}` cannot be read (the daemon's log says why)", path.display())
            }
            SourceError::GitMissing(_) => {
                "git cannot be run by the daemon; install git and make sure it is on its PATH"
                    .to_owned()
            }
            SourceError::Git(path, _) => format!(
                "git could not read the history of `{}` (the daemon's log has git's message)",
                path.display()
            ),
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::NotFound(path) => write!(f, "`{}` does not exist", path.display()),
            SourceError::NotADirectory(path) => {
                write!(f, "`{}` is not a directory", path.display())
            }
            SourceError::OutsideRoots(path, canonical) => write!(
                f,
                "`{}` (`{}`) is outside the connector roots",
                path.display(),
                canonical.display()
            ),
            SourceError::NotAGitRepository(path, reason) => write!(
                f,
                "`{}` is not a git repository (no commits can be read: {reason})",
                path.display()
            ),
            SourceError::EmptyRepository(path) => write!(
                f,
                "`{}` is a git repository, and empty: its current branch has no commits yet",
                path.display()
            ),
            SourceError::Io(path, error) => write!(f, "cannot read `{}`: {error}", path.display()),
            SourceError::GitMissing(error) => write!(f, "cannot run `git`: {error}"),
            SourceError::Git(path, message) => {
                write!(f, "`git log` failed in `{}`: {message}", path.display())
            }
        }
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SourceError::Io(_, error) | SourceError::GitMissing(error) => Some(error),
            _ => None,
        }
    }
}

/// `path` with every symbolic link resolved.
pub(crate) fn canonical(path: &Path) -> Result<PathBuf, SourceError> {
    fs::canonicalize(path).map_err(|error| match error.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => {
            SourceError::NotFound(path.to_path_buf())
        }
        _ => io_error(path, error),
    })
}

fn io_error(path: &Path, error: io::Error) -> SourceError {
    SourceError::Io(path.to_path_buf(), error)
}

/// FNV-1a, 64 bits: stable across Rust versions and platforms, unlike std's hashers.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Fails unless `root` is an existing directory.
pub(crate) fn check_folder(root: &Path) -> Result<(), SourceError> {
    match fs::metadata(root) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => Err(SourceError::NotADirectory(root.to_path_buf())),
        Err(error)
            if matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) =>
        {
            Err(SourceError::NotFound(root.to_path_buf()))
        }
        Err(error) => Err(io_error(root, error)),
    }
}

/// The sections of the Markdown and text files under `root`, in sorted path order.
#[cfg(test)]
pub(crate) fn read_folder(root: &Path) -> Result<Vec<SourceItem>, SourceError> {
    read_folder_with_skips(root).map(|(items, _)| items)
}

/// Like [`read_folder`], and also counts the files left out for being larger than 1 MiB, not
/// valid UTF-8, or named in bytes that are not UTF-8.
pub(crate) fn read_folder_with_skips(root: &Path) -> Result<(Vec<SourceItem>, usize), SourceError> {
    check_folder(root)?;
    let mut walk = Walk { items: Vec::new(), skipped: 0 };
    walk.directory(root, "")?;
    Ok((walk.items, walk.skipped))
}

/// A folder read in progress.
struct Walk {
    items: Vec<SourceItem>,
    skipped: usize,
}

impl Walk {
    /// Reads `directory`, whose path relative to the root is `relative` (empty for the root).
    fn directory(&mut self, directory: &Path, relative: &str) -> Result<(), SourceError> {
        let entries = match fs::read_dir(directory) {
            Ok(entries) => entries,
            // A directory removed since its parent was listed has nothing left to read.
            Err(error) if !relative.is_empty() && error.kind() == io::ErrorKind::NotFound => {
                return Ok(());
            }
            Err(error) => return Err(io_error(directory, error)),
        };
        let mut children: Vec<(OsString, fs::FileType)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| io_error(directory, error))?;
            let file_type = entry.file_type().map_err(|error| io_error(&entry.path(), error))?;
            children.push((entry.file_name(), file_type));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, file_type) in children {
            let path = directory.join(&name);
            let lossy_name = name.to_string_lossy();
            let child = if relative.is_empty() {
                lossy_name.to_string()
            } else {
                format!("{relative}/{lossy_name}")
            };
            // Symbolic links are never followed: they could leave the root, loop, or repeat a
            // file that is read under its own name (`CLAUDE.md` linking to `AGENTS.md`).
            if file_type.is_dir() {
                if name.to_str().is_some() && descends_into(relative, &lossy_name) {
                    self.directory(&path, &child)?;
                }
            } else if file_type.is_file() && is_included(&child) {
                if name.to_str().is_none() {
                    self.skipped += 1;
                } else {
                    self.file(&path, &child)?;
                }
            }
        }
        Ok(())
    }

    /// Reads one file, whose path relative to the root is `relative`.
    fn file(&mut self, path: &Path, relative: &str) -> Result<(), SourceError> {
        let file = match File::open(path) {
            Ok(file) => file,
            // A file removed since its directory was listed is no longer part of the source.
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(io_error(path, error)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| io_error(path, error))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            self.skipped += 1;
            return Ok(());
        }
        let Ok(text) = String::from_utf8(bytes) else {
            self.skipped += 1;
            return Ok(());
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text).replace("\r\n", "\n");
        if is_markdown(relative) {
            self.items.extend(markdown_items(relative, &text));
        } else {
            let mut keys = HashSet::new();
            let body = trim_blank_lines(&text);
            if !body.is_empty() {
                let key = relative.to_string();
                push_parts(&mut self.items, &mut keys, &key, relative, Some(relative), None, body);
            }
        }
        Ok(())
    }
}

/// Whether the directory `name`, inside the directory at `parent` (relative, empty for the
/// root), is read.
fn descends_into(parent: &str, name: &str) -> bool {
    if SKIPPED_DIRECTORIES.contains(&name)
        || (name.starts_with('.') && !HIDDEN_DIRECTORIES_READ.contains(&name))
    {
        return false;
    }
    // Only the rules are read from `.cursor`.
    let parent_name = parent.rsplit('/').next().unwrap_or_default();
    parent_name != ".cursor" || name == "rules"
}

/// Whether the file at `relative` is read: Markdown and text by extension, the agent rule files
/// by name, and `.mdc` rules under `.cursor/rules/`.
fn is_included(relative: &str) -> bool {
    let (directories, name) = relative.rsplit_once('/').unwrap_or(("", relative));
    let segments: Vec<&str> = directories.split('/').collect();
    for (index, segment) in segments.iter().enumerate() {
        if *segment == ".cursor" && segments.get(index + 1) != Some(&"rules") {
            return false;
        }
    }
    if RULE_FILES.contains(&name) {
        return true;
    }
    let extension = extension(name);
    if MARKDOWN_EXTENSIONS.contains(&extension.as_str())
        || TEXT_EXTENSIONS.contains(&extension.as_str())
    {
        return true;
    }
    extension == "mdc" && segments.windows(2).any(|pair| pair == [".cursor", "rules"])
}

/// Whether the file at `relative` is split at Markdown headings; other files are plain text.
fn is_markdown(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    let extension = extension(name);
    RULE_FILES.contains(&name)
        || extension == "mdc"
        || MARKDOWN_EXTENSIONS.contains(&extension.as_str())
}

/// The lower-case extension of a file name, empty when it has none (`.cursorrules` has none).
fn extension(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => extension.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The items of one Markdown file: one per section with text, keyed by the file's relative path
/// and the section's heading path.
fn markdown_items(relative: &str, text: &str) -> Vec<SourceItem> {
    let mut items = Vec::new();
    let mut keys = HashSet::new();
    // Sections are counted by heading path whether or not they have text, so that filling in an
    // empty section does not renumber the later ones.
    let mut counts: HashMap<String, usize> = HashMap::new();
    for section in sections(text) {
        let label = section.headings.join(" > ");
        let count = counts.entry(label.clone()).or_default();
        *count += 1;
        let body = trim_blank_lines(&section.body);
        if body.is_empty() {
            continue;
        }
        if label.is_empty() {
            push_parts(&mut items, &mut keys, relative, relative, Some(relative), None, body);
        } else {
            let mut key = format!("{relative}#{label}");
            if *count > 1 {
                key.push_str(&format!(" ({count})"));
            }
            let origin = format!("{relative} § {label}");
            push_parts(&mut items, &mut keys, &key, &origin, Some(relative), Some(&label), body);
        }
    }
    items
}

/// Pushes the parts of one piece: the first keeps `key`, the next ones get `#part2`, `#part3`,
/// and a key already taken within the same file gets ` (2)`, ` (3)` until it is unique.
fn push_parts(
    items: &mut Vec<SourceItem>,
    keys: &mut HashSet<String>,
    key: &str,
    origin: &str,
    path: Option<&str>,
    heading: Option<&str>,
    body: &str,
) {
    for (index, content) in split_parts(heading, body).into_iter().enumerate() {
        let (key, origin) = if index == 0 {
            (key.to_string(), origin.to_string())
        } else {
            (format!("{key}#part{}", index + 1), format!("{origin} (part {})", index + 1))
        };
        let mut unique = key.clone();
        let mut number = 2;
        while !keys.insert(unique.clone()) {
            unique = format!("{key} ({number})");
            number += 1;
        }
        items.push(SourceItem::new(unique, content, origin, path));
    }
}

/// A Markdown section: the headings above it, outermost first (none before the first heading),
/// and its text without its heading line.
struct Section {
    headings: Vec<String>,
    body: String,
}

/// Splits Markdown into sections at ATX headings (`#` to `######`), ignoring lines in fenced
/// code blocks. Setext headings (text underlined with `===` or `---`) stay text.
fn sections(text: &str) -> Vec<Section> {
    let mut sections = vec![Section { headings: Vec::new(), body: String::new() }];
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut fence: Option<Fence> = None;
    for line in text.lines() {
        if let Some(current) = fence {
            if current.is_closed_by(line) {
                fence = None;
            }
        } else if let Some(opened) = Fence::opened_by(line) {
            fence = Some(opened);
        } else if let Some((level, title)) = heading(line) {
            while open.last().is_some_and(|(open_level, _)| *open_level >= level) {
                open.pop();
            }
            open.push((level, title));
            let headings = open.iter().map(|(_, title)| title.clone()).collect();
            sections.push(Section { headings, body: String::new() });
            continue;
        }
        if let Some(section) = sections.last_mut() {
            section.body.push_str(line);
            section.body.push('\n');
        }
    }
    sections
}

/// An open fenced code block: its marker (a backtick or a tilde) and how many open it.
#[derive(Clone, Copy)]
struct Fence {
    marker: u8,
    length: usize,
}

impl Fence {
    /// The fence `line` opens, as CommonMark reads it: three or more backticks or tildes after
    /// at most three spaces, and no backtick in a backtick fence's info string.
    fn opened_by(line: &str) -> Option<Fence> {
        let rest = strip_indent(line)?;
        let marker = *rest.as_bytes().first()?;
        if marker != b'`' && marker != b'~' {
            return None;
        }
        let length = rest.bytes().take_while(|&byte| byte == marker).count();
        if length < 3 || (marker == b'`' && rest[length..].contains('`')) {
            return None;
        }
        Some(Fence { marker, length })
    }

    /// Whether `line` closes this fence: at least as many of the same marker, nothing after.
    fn is_closed_by(self, line: &str) -> bool {
        let Some(rest) = strip_indent(line) else {
            return false;
        };
        let length = rest.bytes().take_while(|&byte| byte == self.marker).count();
        length >= self.length && rest[length..].trim().is_empty()
    }
}

/// `line` without its indentation, when that is at most three spaces (more makes it code).
fn strip_indent(line: &str) -> Option<&str> {
    let spaces = line.bytes().take_while(|&byte| byte == b' ').count();
    (spaces <= 3).then(|| &line[spaces..])
}

/// The level and title of an ATX heading line, with the closing `#`s dropped and white space
/// collapsed. A heading with no title is not one: its line stays text.
fn heading(line: &str) -> Option<(usize, String)> {
    let rest = strip_indent(line)?;
    let level = rest.bytes().take_while(|&byte| byte == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &rest[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let mut title = rest.trim();
    let unclosed = title.trim_end_matches('#');
    if unclosed.is_empty() || unclosed.ends_with([' ', '\t']) {
        title = unclosed.trim_end();
    }
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.is_empty() {
        return None;
    }
    Some((level, shorten(&title, MAX_HEADING_BYTES)))
}

/// `text` cut to at most `max` bytes on a character boundary, ending in `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", text[..end].trim_end())
}

/// `text` without its leading blank lines and trailing white space; the first line keeps its
/// indentation, which matters to code.
fn trim_blank_lines(text: &str) -> &str {
    let text = text.trim_end();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if !line.trim().is_empty() {
            break;
        }
        start += line.len();
    }
    &text[start..]
}

/// The contents of a piece: `heading` as the first line, a blank line, then `body`. When that is
/// longer than [`MAX_ITEM_BYTES`], `body` is split at paragraphs (then lines, then words) and
/// every part starts with the heading again.
fn split_parts(heading: Option<&str>, body: &str) -> Vec<String> {
    let whole = match heading {
        Some(heading) if body.is_empty() => heading.to_string(),
        Some(heading) => format!("{heading}\n\n{body}"),
        None => body.to_string(),
    };
    if whole.len() <= MAX_ITEM_BYTES {
        return vec![whole];
    }
    match heading {
        Some(heading) if heading.len() <= MAX_ITEM_BYTES / 4 => {
            let prefix = format!("{heading}\n\n");
            chunks(body, MAX_ITEM_BYTES - prefix.len())
                .into_iter()
                .map(|chunk| format!("{prefix}{chunk}"))
                .collect()
        }
        // A heading too long to repeat (a commit subject of many kilobytes) is only in the first
        // part.
        _ => chunks(&whole, MAX_ITEM_BYTES),
    }
}

/// Splits `text` into chunks of at most `budget` bytes, at blank lines where it can, else at
/// line ends, else at white space, else anywhere between characters.
fn chunks(text: &str, budget: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    for paragraph in paragraphs(text) {
        if paragraph.len() <= budget {
            pieces.push(paragraph);
        } else {
            let lines = paragraph.lines().flat_map(|line| split_line(line, budget));
            pieces.extend(pack(lines, "\n", budget));
        }
    }
    pack(pieces, "\n\n", budget)
}

/// The paragraphs of `text`: runs of lines that are not blank.
fn paragraphs(text: &str) -> Vec<String> {
    let mut paragraphs = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                paragraphs.push(current.join("\n"));
                current.clear();
            }
        } else {
            current.push(line);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current.join("\n"));
    }
    paragraphs
}

/// Cuts one line into pieces of at most `budget` bytes, preferring white space in the second
/// half of each piece.
fn split_line(line: &str, budget: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = line;
    while rest.len() > budget {
        let mut cut = budget;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(space) = rest[..cut].rfind(char::is_whitespace).filter(|&at| at > budget / 2) {
            cut = space;
        }
        pieces.push(rest[..cut].trim_end());
        rest = rest[cut..].trim_start();
    }
    pieces.push(rest);
    pieces
}

/// Joins consecutive pieces with `separator` as long as the result fits in `budget` bytes; every
/// piece must fit alone. Blank pieces are dropped.
fn pack<S: AsRef<str>>(
    pieces: impl IntoIterator<Item = S>,
    separator: &str,
    budget: usize,
) -> Vec<String> {
    let mut packed = Vec::new();
    let mut current = String::new();
    for piece in pieces {
        let piece = piece.as_ref();
        if piece.trim().is_empty() {
            continue;
        }
        if !current.is_empty() && current.len() + separator.len() + piece.len() > budget {
            packed.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str(separator);
        }
        current.push_str(piece);
    }
    if !current.is_empty() {
        packed.push(current);
    }
    packed
}

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
fn stderr_text(output: &Output) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `content` to `relative` under `root`, creating the directories on the way.
    fn write(root: &Path, relative: &str, content: impl AsRef<[u8]>) {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn keys(items: &[SourceItem]) -> Vec<&str> {
        items.iter().map(|item| item.key.as_str()).collect()
    }

    fn item<'a>(items: &'a [SourceItem], key: &str) -> &'a SourceItem {
        items.iter().find(|item| item.key == key).unwrap_or_else(|| panic!("no item `{key}`"))
    }

    /// Runs git in `directory` with a fixed identity and no user or system configuration, and
    /// returns its standard output.
    fn git_in(directory: &Path, args: &[&str], date: &str) -> String {
        let mut command = Command::new("git");
        command.arg("-C").arg(directory).args(["-c", "commit.gpgsign=false"]).args(args);
        for variable in GIT_LOCATION_VARIABLES {
            command.env_remove(variable);
        }
        let output = command
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Ada Lovelace")
            .env("GIT_AUTHOR_EMAIL", "ada@example.com")
            .env("GIT_COMMITTER_NAME", "Ada Lovelace")
            .env("GIT_COMMITTER_EMAIL", "ada@example.com")
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {}", stderr_text(&output));
        String::from_utf8(output.stdout).unwrap()
    }

    fn commit(repository: &Path, message: &[&str], date: &str) {
        git_in(repository, &["add", "-A"], date);
        let mut args = vec!["commit", "-q", "--allow-empty"];
        for paragraph in message {
            args.extend(["-m", paragraph]);
        }
        git_in(repository, &args, date);
    }

    /// A repository with three commits; the second changes 53 files.
    fn repository_with_three_commits() -> tempfile::TempDir {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        git_in(root, &["init", "-q"], "2024-01-01T10:00:00+00:00");
        write(root, "README.md", "# Demo\n");
        write(root, "src/main.rs", "fn main() {}\n");
        commit(root, &["Start the project"], "2024-01-01T10:00:00+00:00");
        for index in 0..53 {
            write(root, &format!("data/file{index:02}.txt"), format!("{index}\n"));
        }
        commit(
            root,
            &["Add the data files", "They feed the benchmarks.\nRegenerate with `make data`."],
            "2024-01-02T10:00:00+00:00",
        );
        write(root, "src/main.rs", "fn main() { println!(\"hi\"); }\n");
        write(root, "docs/é ü.md", "accents\n");
        commit(root, &["Say hi"], "2024-01-03T10:00:00+00:00");
        directory
    }

    #[test]
    fn hashes_are_fnv1a_in_sixteen_hex_digits() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        let item = SourceItem::new("k".into(), "a".into(), "o".into(), None);
        assert_eq!(item.content_hash, "af63dc4c8601ec8c");
    }

    #[test]
    fn markdown_splits_into_sections_with_heading_paths() {
        let directory = tempfile::tempdir().unwrap();
        write(
            directory.path(),
            "docs/setup.md",
            "Intro text.\n\n# Setup\n\nRead this first.\n\n## Linux\n\n  Run `apt install`.\n\n\
             ## macOS ##\n\nRun `brew install`.\n\n### Apple silicon\n\nUse arm64.\n\n\
             # Usage\n\n## Flags\n\n`--fast`\n\n#NotAHeading\n    # indented code\n",
        );
        let items = read_folder(directory.path()).unwrap();
        assert_eq!(
            keys(&items),
            [
                "docs/setup.md",
                "docs/setup.md#Setup",
                "docs/setup.md#Setup > Linux",
                "docs/setup.md#Setup > macOS",
                "docs/setup.md#Setup > macOS > Apple silicon",
                "docs/setup.md#Usage > Flags",
            ]
        );
        let preamble = item(&items, "docs/setup.md");
        assert_eq!(preamble.content, "Intro text.");
        assert_eq!(preamble.origin, "docs/setup.md");
        let linux = item(&items, "docs/setup.md#Setup > Linux");
        assert_eq!(linux.content, "Setup > Linux\n\n  Run `apt install`.");
        assert_eq!(linux.origin, "docs/setup.md § Setup > Linux");
        assert_eq!(linux.path.as_deref(), Some("docs/setup.md"));
        assert_eq!(linux.content_hash, format!("{:016x}", fnv1a64(linux.content.as_bytes())));
        // A level that goes back up closes the deeper headings; `#` without a space is text.
        assert_eq!(
            item(&items, "docs/setup.md#Usage > Flags").content,
            "Usage > Flags\n\n`--fast`\n\n#NotAHeading\n    # indented code"
        );
    }

    #[test]
    fn hashes_in_fenced_code_are_not_headings() {
        let directory = tempfile::tempdir().unwrap();
        write(
            directory.path(),
            "AGENTS.md",
            "# Build\n\n```bash\n# install the tools\nmake tools\n```\n\n\
             ~~~~\n# still code\n~~~\n## still code\n~~~~\n\n\
             ````md\n```\n# nested fence, still code\n```\n````\n\n## Test\n\nRun `make test`.\n",
        );
        let items = read_folder(directory.path()).unwrap();
        assert_eq!(keys(&items), ["AGENTS.md#Build", "AGENTS.md#Build > Test"]);
        let build = &items[0].content;
        for line in ["# install the tools", "# still code", "## still code", "# nested fence"] {
            assert!(build.contains(line), "{line} is missing from {build}");
        }
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end_of_the_file() {
        let directory = tempfile::tempdir().unwrap();
        write(directory.path(), "a.md", "# One\n\n```\n# two\n");
        let items = read_folder(directory.path()).unwrap();
        assert_eq!(keys(&items), ["a.md#One"]);
    }

    #[test]
    fn duplicate_heading_paths_are_numbered_in_order() {
        let directory = tempfile::tempdir().unwrap();
        write(
            directory.path(),
            "notes.md",
            "# Notes\n\nfirst\n\n# Notes\n\n# Notes\n\nthird\n\n## Notes\n\nnested\n",
        );
        let items = read_folder(directory.path()).unwrap();
        // The empty second section has no item but keeps its number.
        assert_eq!(
            keys(&items),
            ["notes.md#Notes", "notes.md#Notes (3)", "notes.md#Notes > Notes"]
        );
        assert_eq!(items[1].content, "Notes\n\nthird");
        assert_eq!(items[1].origin, "notes.md § Notes");
    }

    #[test]
    fn skipped_directories_and_other_files_are_left_out() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        for skipped in [
            ".git",
            "node_modules/pkg",
            "target",
            "dist",
            "build",
            "vendor",
            ".venv",
            ".hidden",
            "docs/node_modules",
            ".cursor",
            ".cursor/other",
        ] {
            write(root, &format!("{skipped}/README.md"), "# Skipped\n\ntext\n");
        }
        write(root, "main.rs", "// # not read\n");
        write(root, "logo.png", [0x89, b'P', b'N', b'G']);
        write(root, "docs/guide.MD", "# Guide\n\ntext\n");
        write(root, "docs/build.md", "A file named like a skipped directory is read.\n");
        write(root, ".github/ISSUE_TEMPLATE/bug.md", "Describe the bug.\n");
        let items = read_folder(root).unwrap();
        assert_eq!(
            keys(&items),
            [".github/ISSUE_TEMPLATE/bug.md", "docs/build.md", "docs/guide.MD#Guide"]
        );
    }

    #[test]
    fn agent_files_are_read_by_name() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        write(root, "AGENTS.md", "Use pnpm.\n");
        write(root, "CLAUDE.md", "# Style\n\nNo unwrap.\n");
        write(root, "GEMINI.md", "Be brief.\n");
        write(root, ".cursorrules", "# Rules\n\nTabs, not spaces.\n");
        write(root, ".windsurfrules", "Windsurf rule.\n");
        write(root, ".clinerules", "Cline rule.\n");
        write(root, ".github/copilot-instructions.md", "Copilot rule.\n");
        write(root, ".cursor/rules/style.mdc", "---\nglobs: *.rs\n---\n\n# Rust\n\nUse clippy.\n");
        write(root, ".cursor/rules/nested/db.mdc", "Use migrations.\n");
        write(root, "pkg/.cursor/rules/pkg.mdc", "Package rule.\n");
        write(root, "docs/other.mdc", "An .mdc outside the Cursor rules is not read.\n");
        write(root, "notes.txt", "# A text file is not split at headings.\n\n# Really.\n");
        write(root, "guide.rst", "Guide\n=====\n\nText.\n");
        let items = read_folder(root).unwrap();
        assert_eq!(
            keys(&items),
            [
                ".clinerules",
                ".cursor/rules/nested/db.mdc",
                ".cursor/rules/style.mdc",
                ".cursor/rules/style.mdc#Rust",
                ".cursorrules#Rules",
                ".github/copilot-instructions.md",
                ".windsurfrules",
                "AGENTS.md",
                "CLAUDE.md#Style",
                "GEMINI.md",
                "guide.rst",
                "notes.txt",
                "pkg/.cursor/rules/pkg.mdc",
            ]
        );
        assert_eq!(item(&items, ".cursor/rules/style.mdc").content, "---\nglobs: *.rs\n---");
        assert_eq!(
            item(&items, "notes.txt").content,
            "# A text file is not split at headings.\n\n# Really."
        );
        assert_eq!(item(&items, "notes.txt").origin, "notes.txt");
    }

    #[test]
    fn large_and_non_utf8_files_are_skipped_and_counted() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        write(root, "latin1.md", b"caf\xe9\n");
        write(root, "huge.txt", "word ".repeat(220_000));
        write(root, "exactly-1-mib.txt", "x".repeat(1024 * 1024));
        write(root, "ok.md", "\u{feff}Fine.\r\nStill fine.\r\n");
        let (items, skipped) = read_folder_with_skips(root).unwrap();
        assert_eq!(skipped, 2);
        assert_eq!(keys(&items)[..2], ["exactly-1-mib.txt", "exactly-1-mib.txt#part2"]);
        assert_eq!(item(&items, "ok.md").content, "Fine.\nStill fine.");
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_not_followed() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        write(root, "AGENTS.md", "Use pnpm.\n");
        std::os::unix::fs::symlink(root.join("AGENTS.md"), root.join("CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink(root, root.join("loop")).unwrap();
        assert_eq!(keys(&read_folder(root).unwrap()), ["AGENTS.md"]);
    }

    #[test]
    fn large_sections_and_files_are_split_at_paragraphs() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        let paragraphs: Vec<String> = (0..400)
            .map(|index| format!("Paragraph {index}. {}", "lorem ipsum ".repeat(8).trim_end()))
            .collect();
        write(root, "big.md", format!("# Big\n\n## Part\n\n{}\n", paragraphs.join("\n\n")));
        write(root, "big.txt", paragraphs.join("\n\n"));
        // One line of 40 KiB with no white space at all, cut between characters.
        write(root, "line.txt", "é".repeat(20 * 1024));
        let items = read_folder(root).unwrap();

        let of = |path: &str| -> Vec<&SourceItem> {
            items.iter().filter(|item| item.path.as_deref() == Some(path)).collect()
        };

        let sections = of("big.md");
        let section_keys: Vec<&str> = sections.iter().map(|item| item.key.as_str()).collect();
        assert_eq!(
            section_keys,
            ["big.md#Big > Part", "big.md#Big > Part#part2", "big.md#Big > Part#part3"]
        );
        assert_eq!(sections[1].origin, "big.md § Big > Part (part 2)");
        let mut seen = Vec::new();
        for section in &sections {
            assert!(section.content.len() <= MAX_ITEM_BYTES);
            // Every part starts with the heading path again.
            let body = section.content.strip_prefix("Big > Part\n\n").unwrap();
            seen.extend(body.split("\n\n").map(str::to_string));
        }
        assert!(seen == paragraphs, "the parts do not hold the paragraphs in order");

        let text = of("big.txt");
        let text_keys: Vec<&str> = text.iter().map(|item| item.key.as_str()).collect();
        assert_eq!(text_keys, ["big.txt", "big.txt#part2", "big.txt#part3"]);
        assert_eq!(text[2].origin, "big.txt (part 3)");
        assert!(text.iter().all(|item| item.content.len() <= MAX_ITEM_BYTES));
        let joined = text.iter().map(|item| item.content.as_str()).collect::<Vec<_>>().join("\n\n");
        assert!(joined == paragraphs.join("\n\n"), "the text parts lose or reorder text");

        let line = of("line.txt");
        assert_eq!(line.len(), 3);
        assert!(line.iter().all(|item| item.content.len() <= MAX_ITEM_BYTES));
        let joined: String = line.iter().map(|item| item.content.as_str()).collect();
        assert!(joined == "é".repeat(20 * 1024), "the line parts lose or reorder text");
    }

    #[test]
    fn keys_stay_when_unrelated_sections_change() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        write(root, "guide.md", "# Install\n\nRun the installer.\n\n# Use\n\nRun `cairn`.\n");
        write(root, "other.md", "Other.\n");
        let before = read_folder(root).unwrap();
        write(
            root,
            "guide.md",
            "Added preamble.\n\n# Install\n\nRun the new installer.\n\n# Use\n\nRun `cairn`.\n\n\
             # FAQ\n\nNone yet.\n",
        );
        write(root, "a-new-file.md", "New.\n");
        let after = read_folder(root).unwrap();
        let unchanged = ["guide.md#Use", "other.md"];
        for key in unchanged {
            assert_eq!(item(&before, key), item(&after, key));
        }
        let (old, new) = (item(&before, "guide.md#Install"), item(&after, "guide.md#Install"));
        assert_ne!(old.content_hash, new.content_hash);
        assert_eq!(
            keys(&after),
            [
                "a-new-file.md",
                "guide.md",
                "guide.md#Install",
                "guide.md#Use",
                "guide.md#FAQ",
                "other.md"
            ]
        );
    }

    #[test]
    fn a_part_key_that_is_also_a_heading_key_stays_unique() {
        let directory = tempfile::tempdir().unwrap();
        let paragraph = "x".repeat(10_000);
        write(directory.path(), "a.md", format!("{paragraph}\n\n{paragraph}\n\n# part2\n\ny\n"));
        let items = read_folder(directory.path()).unwrap();
        assert_eq!(keys(&items), ["a.md", "a.md#part2", "a.md#part2 (2)"]);
    }

    #[test]
    fn check_folder_names_what_is_wrong() {
        let directory = tempfile::tempdir().unwrap();
        let missing = directory.path().join("missing");
        let error = check_folder(&missing).unwrap_err();
        assert!(matches!(&error, SourceError::NotFound(path) if *path == missing));
        assert_eq!(error.to_string(), format!("`{}` does not exist", missing.display()));

        let file = directory.path().join("file.md");
        write(directory.path(), "file.md", "text");
        let error = check_folder(&file).unwrap_err();
        assert!(matches!(&error, SourceError::NotADirectory(path) if *path == file));
        assert_eq!(error.to_string(), format!("`{}` is not a directory", file.display()));
        assert!(matches!(read_folder(&file), Err(SourceError::NotADirectory(_))));
        assert!(matches!(check_folder(&file.join("below")), Err(SourceError::NotFound(_))));
        assert!(check_folder(directory.path()).is_ok());
    }

    #[test]
    fn git_commits_become_items_keyed_by_sha() {
        let directory = repository_with_three_commits();
        let root = directory.path();
        let shas: Vec<String> = git_in(root, &["log", "--format=%H"], "2024-01-04T00:00:00+00:00")
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(shas.len(), 3);
        check_git(root).unwrap();

        let items = read_git(root, 10).unwrap();
        assert_eq!(keys(&items), shas.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(items.iter().all(|item| item.path.is_none()));

        assert_eq!(items[0].content, "Say hi\n\nFiles: docs/é ü.md, src/main.rs");
        assert_eq!(
            items[0].origin,
            format!("commit {} by Ada Lovelace on 2024-01-03", &shas[0][..7])
        );

        let data = &items[1].content;
        assert!(data.starts_with(
            "Add the data files\n\nThey feed the benchmarks.\nRegenerate with `make data`.\n\n\
             Files: data/file00.txt, data/file01.txt, "
        ));
        assert!(data.ends_with("data/file49.txt and 3 more"), "{data}");
        assert!(!data.contains("file50"));

        assert_eq!(items[2].content, "Start the project\n\nFiles: README.md, src/main.rs");
        assert_eq!(
            items[2].origin,
            format!("commit {} by Ada Lovelace on 2024-01-01", &shas[2][..7])
        );
    }

    #[test]
    fn git_reads_at_most_max_commits() {
        let directory = repository_with_three_commits();
        let all = read_git(directory.path(), 3).unwrap();
        let newest = read_git(directory.path(), 2).unwrap();
        assert_eq!(newest, all[..2]);
        assert!(read_git(directory.path(), 0).unwrap().is_empty());
    }

    #[test]
    fn git_messages_keep_empty_subjects_and_separators() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        git_in(root, &["init", "-q"], "2024-01-01T10:00:00+00:00");
        git_in(
            root,
            &["commit", "-q", "--allow-empty", "--allow-empty-message", "-m", ""],
            "2024-01-01T10:00:00+00:00",
        );
        commit(
            root,
            &["Odd \u{1e} subject", "Body with \u{1e} and \u{1f} in it."],
            "2024-01-02T10:00:00+00:00",
        );
        let items = read_git(root, 5).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].content, "Odd \u{1e} subject\n\nBody with \u{1e} and \u{1f} in it.");
        assert_eq!(items[1].content, "(no commit message)");
    }

    #[test]
    fn check_git_rejects_plain_directories_and_empty_repositories() {
        let directory = tempfile::tempdir().unwrap();
        let plain = directory.path().join("plain");
        fs::create_dir(&plain).unwrap();
        let error = check_git(&plain).unwrap_err();
        let SourceError::NotAGitRepository(path, reason) = &error else {
            panic!("unexpected error: {error}");
        };
        assert_eq!(*path, plain);
        // Git's own words, without its `fatal: ` prefix.
        assert!(reason.starts_with("not a git repository"), "{reason}");
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` is not a git repository (no commits can be read: {reason})",
                plain.display()
            )
        );
        assert!(matches!(read_git(&plain, 5), Err(SourceError::NotAGitRepository(..))));

        let empty = directory.path().join("empty");
        fs::create_dir(&empty).unwrap();
        git_in(&empty, &["init", "-q"], "2024-01-01T10:00:00+00:00");
        let error = check_git(&empty).unwrap_err();
        assert!(matches!(&error, SourceError::EmptyRepository(path) if *path == empty));
        assert!(error.public_message().contains("no commits yet"), "{error}");

        assert!(matches!(
            check_git(&directory.path().join("missing")),
            Err(SourceError::NotFound(_))
        ));
    }

    #[test]
    fn clients_are_told_what_is_wrong_in_cairns_words_alone() {
        let directory = tempfile::tempdir().unwrap();
        let plain = directory.path().join("plain");
        fs::create_dir(&plain).unwrap();
        let error = check_git(&plain).unwrap_err();
        let told = error.public_message();
        assert!(told.contains("is not a git repository"), "{told}");
        assert!(
            !told.contains("fatal") && !told.contains(".git"),
            "git's words stay in the log: {told}"
        );
        assert!(error.to_string().contains("not a git repository"), "the log has git's words");

        let io = SourceError::Io(
            plain.join("a.md"),
            io::Error::other("Input/output error (os error 5) at inode 1234"),
        );
        let told = io.public_message();
        assert_eq!(
            told,
            format!(
                "`{}` cannot be read (the daemon's log says why)",
                plain.join("a.md").display()
            )
        );
        let denied =
            SourceError::Io(plain.clone(), io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(denied.public_message().contains("no permission"));
        let git =
            SourceError::Git(plain.clone(), "bad object 0123abc in /srv/secret/.git".to_owned());
        assert!(!git.public_message().contains("/srv/secret"), "{}", git.public_message());
        let missing = SourceError::GitMissing(io::Error::from(io::ErrorKind::NotFound));
        assert!(missing.public_message().contains("install git"));
        let outside = SourceError::OutsideRoots(plain.clone(), PathBuf::from("/etc"));
        assert!(!outside.public_message().contains("/etc"), "where a link leads is not told");
    }

    #[test]
    fn check_git_wants_the_top_of_the_repository() {
        let directory = repository_with_three_commits();
        let error = check_git(&directory.path().join("src")).unwrap_err();
        assert!(matches!(error, SourceError::NotAGitRepository(..)), "{error}");
    }
}
