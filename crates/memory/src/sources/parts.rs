//! Parts: pieces longer than an item holds split at paragraphs, lines or words, each part
//! keyed uniquely.

use std::collections::HashSet;

use super::{MAX_ITEM_BYTES, SourceItem};

/// Pushes the parts of one piece: the first keeps `key`, the next ones get `#part2`, `#part3`,
/// and a key already taken within the same file gets ` (2)`, ` (3)` until it is unique.
pub(super) fn push_parts(
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
