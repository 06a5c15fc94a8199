//! A repository's identity, one rule for hooks, the CLI and connectors alike: the name of
//! its `origin` remote when it has one (`git@github.com:acme/shop.git` is `shop`), else the
//! name of its root folder; in lower case, since names are compared case-insensitively
//! (`Shop` and `shop` are one repository). `CAIRN_REPO` or `--repo` overrides it where a
//! command takes them.

use std::path::{Path, PathBuf};

/// Where a repository's name came from, for `cairn status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoSource {
    /// Its `origin` remote's URL.
    Origin,
    /// Its root folder's name (no `origin`).
    Folder,
}

/// The repository `path` is in (the nearest folder above it with a `.git`), and its name.
pub fn repo_identity(path: &Path) -> Option<(String, RepoSource, PathBuf)> {
    let root = path.ancestors().find(|dir| dir.join(".git").exists())?.to_owned();
    if let Some(name) = origin_url(&root).as_deref().and_then(name_of_url) {
        return Some((name, RepoSource::Origin, root));
    }
    let folder = root.file_name()?.to_string_lossy().to_lowercase();
    Some((folder, RepoSource::Folder, root))
}

/// The `url` of `[remote "origin"]` in the repository's config (a `.git` file, as a
/// worktree or submodule has, points to the git directory).
fn origin_url(root: &Path) -> Option<String> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        let target = root.join(target);
        // A linked worktree's git directory keeps its config in the common directory.
        match std::fs::read_to_string(target.join("commondir")) {
            Ok(common) => target.join(common.trim()),
            Err(_) => target,
        }
    } else {
        dot_git
    };
    let config = std::fs::read_to_string(git_dir.join("config")).ok()?;
    let mut in_origin = false;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_origin = line.replace(char::is_whitespace, "") == "[remote\"origin\"]";
        } else if in_origin
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "url"
        {
            return Some(value.trim().to_owned());
        }
    }
    None
}

/// `shop` for `git@github.com:acme/shop.git`, `https://host/acme/shop`, `/srv/git/shop.git`.
fn name_of_url(url: &str) -> Option<String> {
    let last = url.trim_end_matches('/').rsplit(['/', ':']).next()?;
    let name = last.strip_suffix(".git").unwrap_or(last);
    (!name.is_empty()).then(|| name.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_named_by_its_origin_else_its_folder_in_lower_case() {
        for (url, name) in [
            ("git@github.com:acme/Shop.git", "shop"),
            ("https://github.com/acme/shop", "shop"),
            ("https://github.com/acme/shop.git/", "shop"),
            ("/srv/git/billing.git", "billing"),
            ("ssh://git@host:22/team/api.git", "api"),
        ] {
            assert_eq!(name_of_url(url).as_deref(), Some(name), "{url}");
        }
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path().join("Shop-Main");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("docs/guides")).unwrap();
        let (name, source, found) = repo_identity(&root.join("docs/guides")).unwrap();
        assert_eq!((name.as_str(), source, found), ("shop-main", RepoSource::Folder, root.clone()));
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = x:y/other.git\n[remote \"origin\"]\n\turl = git@github.com:acme/shop.git\n",
        )
        .unwrap();
        assert_eq!(repo_identity(&root.join("docs")).unwrap().0, "shop");
        assert_eq!(repo_identity(directory.path()), None, "not in a repository");
    }
}
