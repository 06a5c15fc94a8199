//! Tests of the sources: folders and their Markdown sections, parts, and git histories.

use std::process::Command;

use super::git::stderr_text;
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
    assert_eq!(keys(&items), ["notes.md#Notes", "notes.md#Notes (3)", "notes.md#Notes > Notes"]);
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
    assert_eq!(items[0].origin, format!("commit {} by Ada Lovelace on 2024-01-03", &shas[0][..7]));

    let data = &items[1].content;
    assert!(data.starts_with(
        "Add the data files\n\nThey feed the benchmarks.\nRegenerate with `make data`.\n\n\
         Files: data/file00.txt, data/file01.txt, "
    ));
    assert!(data.ends_with("data/file49.txt and 3 more"), "{data}");
    assert!(!data.contains("file50"));

    assert_eq!(items[2].content, "Start the project\n\nFiles: README.md, src/main.rs");
    assert_eq!(items[2].origin, format!("commit {} by Ada Lovelace on 2024-01-01", &shas[2][..7]));
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
        format!("`{}` is not a git repository (no commits can be read: {reason})", plain.display())
    );
    assert!(matches!(read_git(&plain, 5), Err(SourceError::NotAGitRepository(..))));

    let empty = directory.path().join("empty");
    fs::create_dir(&empty).unwrap();
    git_in(&empty, &["init", "-q"], "2024-01-01T10:00:00+00:00");
    let error = check_git(&empty).unwrap_err();
    assert!(matches!(&error, SourceError::EmptyRepository(path) if *path == empty));
    assert!(error.public_message().contains("no commits yet"), "{error}");

    assert!(matches!(check_git(&directory.path().join("missing")), Err(SourceError::NotFound(_))));
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
        format!("`{}` cannot be read (the daemon's log says why)", plain.join("a.md").display())
    );
    let denied = SourceError::Io(plain.clone(), io::Error::from(io::ErrorKind::PermissionDenied));
    assert!(denied.public_message().contains("no permission"));
    let git = SourceError::Git(plain.clone(), "bad object 0123abc in /srv/secret/.git".to_owned());
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
