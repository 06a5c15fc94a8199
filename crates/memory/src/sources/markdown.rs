//! Markdown: the sections of a file at its ATX headings, fenced code left alone.

use std::collections::{HashMap, HashSet};

use super::parts::push_parts;
use super::{MAX_HEADING_BYTES, SourceItem};

/// The items of one Markdown file: one per section with text, keyed by the file's relative path
/// and the section's heading path.
pub(super) fn markdown_items(relative: &str, text: &str) -> Vec<SourceItem> {
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
pub(super) fn trim_blank_lines(text: &str) -> &str {
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
