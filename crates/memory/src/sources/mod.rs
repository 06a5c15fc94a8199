//! The content Cairn's connectors import as memories: Markdown and text files in a folder, split
//! into sections at their headings, and the commits of a git repository.
//!
//! Every piece becomes a [`SourceItem`] whose key stays the same across syncs while the piece
//! exists, and whose content hash changes when its text does, so a connector can tell new,
//! changed and removed pieces apart. Reading is all or nothing: an unreadable file or folder
//! fails the whole read rather than leaving pieces out, because a connector would take a missing
//! piece for a removed one.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

mod folder;
mod git;
mod markdown;
mod parts;

#[cfg(test)]
pub(crate) use folder::read_folder;
pub(crate) use folder::read_folder_with_skips;
pub(crate) use git::{check_git, git_locations, read_git};

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

#[cfg(test)]
mod tests;
