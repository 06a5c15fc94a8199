//! The rules for SQL, given as the action itself or to a client (`psql -c`, `mysql -e`,
//! `sqlite3 DB SQL`): dropped tables and databases, truncates, and deletes with no `WHERE`.

use std::sync::LazyLock;

use regex::Regex;

use super::Findings;
use crate::shell::{self, Command};

/// Keywords that start an SQL statement (and rarely a shell command or a sentence).
const SQL_KEYWORDS: &[&str] = &[
    "select", "insert", "update", "delete", "drop", "truncate", "alter", "create", "with", "merge",
    "grant", "revoke", "begin", "replace",
];

/// Whether the action is SQL rather than a shell command: its first word, after SQL
/// comments, is an SQL keyword.
pub(super) fn looks_like_sql(action: &str) -> bool {
    let mut text = action.trim_start();
    loop {
        if let Some(rest) = text.strip_prefix("--") {
            text = rest.split_once('\n').map_or("", |(_, rest)| rest).trim_start();
        } else if let Some(rest) = text.strip_prefix("/*") {
            text = rest.split_once("*/").map_or("", |(_, rest)| rest).trim_start();
        } else {
            break;
        }
    }
    let keyword: String =
        text.chars().take_while(char::is_ascii_alphabetic).collect::<String>().to_ascii_lowercase();
    SQL_KEYWORDS.contains(&keyword.as_str())
}

static SQL_DROP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^drop\s+(?:temporary\s+)?(table|database|schema)\b").expect("valid pattern")
});
static SQL_TRUNCATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)^truncate\s+(?:table\s+)?(?:only\s+)?[\w."`\[\]]+(?:\s*,\s*[\w."`\[\]]+)*(?:\s+(?:restart|continue)\s+identity)?(?:\s+(?:cascade|restrict))?$"#,
    )
    .expect("valid pattern")
});
static SQL_DELETE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^delete\s+from\s+\S+").expect("valid pattern"));
static SQL_WHERE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bwhere\b").expect("valid pattern"));

pub(super) fn check_sql(sql: &str, findings: &mut Findings) {
    for statement in without_sql_literals(sql).split(';') {
        let statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        let shown = shell::shorten(&statement, 60);
        if let Some(kind) = SQL_DROP.captures(&statement).and_then(|captures| captures.get(1)) {
            findings.block(
                "DROP_TABLE",
                format!(
                    "`{shown}` destroys the {} and all its data",
                    kind.as_str().to_ascii_lowercase()
                ),
            );
        } else if SQL_TRUNCATE.is_match(&statement) {
            findings.block("TRUNCATE_TABLE", format!("`{shown}` deletes every row of the table"));
        } else if SQL_DELETE.is_match(&statement) && !SQL_WHERE.is_match(&statement) {
            findings.warn(
                "UNBOUNDED_DELETE",
                format!("`{shown}` has no WHERE: it deletes every row of the table"),
            );
        }
    }
}

/// SQL with its string literals emptied and its comments removed, so neither is read as SQL.
fn without_sql_literals(sql: &str) -> String {
    let mut cleaned = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                cleaned.push_str("''");
                while let Some(inner) = chars.next() {
                    if inner == '\'' && chars.peek() != Some(&'\'') {
                        break;
                    }
                    if inner == '\'' {
                        chars.next();
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for inner in chars.by_ref() {
                    if inner == '\n' {
                        cleaned.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                for inner in chars.by_ref() {
                    if previous == '*' && inner == '/' {
                        break;
                    }
                    previous = inner;
                }
                cleaned.push(' ');
            }
            _ => cleaned.push(c),
        }
    }
    cleaned
}

/// The SQL an SQL client is given: `psql -c`, `mysql -e`, `sqlite3 DB SQL`, or its standard
/// input when the line holds it (`psql <<EOF`, `echo … | psql`).
pub(super) fn client_sql(program: &str, command: &Command) -> Vec<String> {
    let args = command.args();
    let mut sql = Vec::new();
    match program {
        "psql" | "mysql" | "mariadb" => {
            let (short, long) =
                if program == "psql" { ('c', "--command") } else { ('e', "--execute") };
            let mut words = args.iter();
            while let Some(word) = words.next() {
                let text = word.text.as_str();
                if let Some(value) = text.strip_prefix(long).and_then(|rest| rest.strip_prefix('='))
                {
                    sql.push(value.to_owned());
                } else if text == long || is_short_group_ending(text, short) {
                    sql.extend(words.next().map(|next| next.text.clone()));
                }
            }
        }
        _ => {
            // sqlite3 [OPTIONS] DATABASE [SQL…]
            let mut operands = Vec::new();
            let mut words = args.iter();
            while let Some(word) = words.next() {
                match word.text.as_str() {
                    "-cmd" => sql.extend(words.next().map(|next| next.text.clone())),
                    "-init" | "-separator" | "-newline" | "-nullvalue" | "-vfs" => {
                        words.next();
                    }
                    option if option.starts_with('-') => {}
                    operand => operands.push(operand.to_owned()),
                }
            }
            sql.extend(operands.into_iter().skip(1));
        }
    }
    sql.extend(command.stdin.clone());
    sql
}

/// `-c`, `-tAc`: a short group of at most three letters ending with `letter`.
fn is_short_group_ending(text: &str, letter: char) -> bool {
    text.strip_prefix('-').is_some_and(|letters| {
        !letters.starts_with('-')
            && letters.ends_with(letter)
            && letters.len() <= 3
            && letters.chars().all(|c| c.is_ascii_alphabetic())
    })
}
