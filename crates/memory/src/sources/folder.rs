//! Reading a folder: the walk over its directories, and which files are read.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use super::markdown::{markdown_items, trim_blank_lines};
use super::parts::push_parts;
use super::{
    HIDDEN_DIRECTORIES_READ, MARKDOWN_EXTENSIONS, MAX_FILE_BYTES, RULE_FILES, SKIPPED_DIRECTORIES,
    SourceError, SourceItem, TEXT_EXTENSIONS, check_folder, io_error,
};

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
