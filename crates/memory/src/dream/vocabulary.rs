//! The vocabulary: groups of exclusive choices and the words that signal statements.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// A group of mutually exclusive choices: preferring two of them is a contradiction.
pub(super) struct Group {
    pub(super) name: &'static str,
    pub(super) members: &'static [Member],
    /// Beginnings of words that make a sentence about this group, so that its ambiguous
    /// member names count.
    pub(super) context: &'static [&'static str],
}

pub(super) struct Member {
    pub(super) name: &'static str,
    /// Names that always mean this member, lower case, words separated by single spaces.
    names: &'static [&'static str],
    /// Names that mean this member only in a sentence about the group ("tabs", "main").
    ambiguous: &'static [&'static str],
}

const fn member(
    name: &'static str,
    names: &'static [&'static str],
    ambiguous: &'static [&'static str],
) -> Member {
    Member { name, names, ambiguous }
}

const PACKAGE_MANAGER: usize = 0;
const JS_TEST_RUNNER: usize = 1;
const PY_TEST_RUNNER: usize = 2;
const FORMATTER: usize = 3;
const PY_FORMATTER: usize = 4;
pub(super) const INDENTATION: usize = 5;
const QUOTES: usize = 6;
const PY_PACKAGE_MANAGER: usize = 7;
const CONTAINER_TOOL: usize = 8;
const BRANCH: usize = 9;
/// The member "spaces" of [`INDENTATION`].
pub(super) const SPACES: usize = 1;

pub(super) static GROUPS: [Group; 10] = [
    Group {
        name: "package manager",
        members: &[
            member("npm", &["npm"], &[]),
            member("pnpm", &["pnpm"], &[]),
            member("yarn", &["yarn", "yarnpkg"], &[]),
            member("bun", &["bun"], &[]),
        ],
        context: &["package", "install", "depend"],
    },
    Group {
        name: "JavaScript test runner",
        members: &[
            member("jest", &["jest"], &[]),
            member("vitest", &["vitest"], &[]),
            member("mocha", &["mocha"], &[]),
            member("ava", &[], &["ava"]),
        ],
        context: &["test", "spec", "javascript", "typescript"],
    },
    Group {
        name: "Python test runner",
        members: &[
            member("pytest", &["pytest", "py.test"], &[]),
            member("unittest", &["unittest"], &[]),
            member("nose", &["nose", "nose2", "nosetests"], &[]),
        ],
        context: &["test"],
    },
    Group {
        name: "formatter",
        members: &[
            member("prettier", &["prettier"], &[]),
            member("biome", &["biome"], &[]),
            member("dprint", &["dprint"], &[]),
        ],
        context: &["format"],
    },
    Group {
        name: "Python formatter",
        members: &[
            member("black", &["black"], &[]),
            member("ruff format", &["ruff format"], &["ruff"]),
            member("yapf", &["yapf"], &[]),
            member("autopep8", &["autopep8"], &[]),
        ],
        context: &["format"],
    },
    Group {
        name: "indentation",
        members: &[
            member("tabs", &["hard tabs", "tab characters", "tab indentation"], &["tabs", "tab"]),
            member("spaces", &["soft tabs", "space indentation"], &["spaces", "space"]),
        ],
        context: &["indent"],
    },
    Group {
        name: "quotes",
        members: &[
            member(
                "single quotes",
                &["single quotes", "single quote", "single quoted", "single quoted strings"],
                &["single"],
            ),
            member(
                "double quotes",
                &["double quotes", "double quote", "double quoted", "double quoted strings"],
                &["double"],
            ),
        ],
        context: &["quot", "string"],
    },
    Group {
        name: "Python package manager",
        members: &[
            member("pip", &["pip", "pip3"], &[]),
            member("poetry", &["poetry"], &[]),
            member("uv", &["uv"], &[]),
            member("pipenv", &["pipenv"], &[]),
            member("conda", &["conda"], &[]),
        ],
        context: &["python", "package", "install", "depend"],
    },
    Group {
        name: "container tool",
        members: &[member("docker", &["docker"], &[]), member("podman", &["podman"], &[])],
        context: &["container"],
    },
    Group {
        name: "branch",
        members: &[
            member("main", &[], &["main"]),
            member("master", &["master branch"], &["master"]),
        ],
        context: &["branch", "trunk"],
    },
];

/// Nouns naming groups, as the last words before "is" or ":" ("the default branch is main")
/// or the first after "is the" ("npm is the package manager").
pub(super) const GROUP_NOUNS: &[(&str, &[usize])] = &[
    ("package manager", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("dependency manager", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("test runner", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("test framework", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("testing framework", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("formatter", &[FORMATTER, PY_FORMATTER]),
    ("indentation", &[INDENTATION]),
    ("indent style", &[INDENTATION]),
    ("indent", &[INDENTATION]),
    ("quote style", &[QUOTES]),
    ("quotes", &[QUOTES]),
    ("container tool", &[CONTAINER_TOOL]),
    ("container runtime", &[CONTAINER_TOOL]),
    ("container engine", &[CONTAINER_TOOL]),
    ("branch", &[BRANCH]),
    ("trunk", &[BRANCH]),
];

/// Beginnings of words that choose within groups when followed by a linking word ("install
/// with pnpm", "indent with tabs", "branch off main") or preceded by "for" ("tabs for
/// indentation").
pub(super) const GROUP_VERBS: &[(&str, &[usize])] = &[
    ("install", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("manage", &[PACKAGE_MANAGER, PY_PACKAGE_MANAGER]),
    ("test", &[JS_TEST_RUNNER, PY_TEST_RUNNER]),
    ("format", &[FORMATTER, PY_FORMATTER]),
    ("indent", &[INDENTATION]),
    ("branch", &[BRANCH]),
    ("container", &[CONTAINER_TOOL]),
    ("image", &[CONTAINER_TOOL]),
];

/// Words linking a group verb to its choice.
pub(super) const LINKERS: &[&str] =
    &["by", "from", "in", "off", "on", "through", "under", "using", "via", "with"];

/// Adjectives between "is the" and a group noun ("npm is the default package manager").
pub(super) static NOUN_ADJECTIVES: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "a an approved chosen configured current default main official one only our preferred \
        primary recommended required sole standard the this",
    )
});

/// Words after "is" that prohibit the subject ("yarn is banned").
pub(super) static PROHIBITED_STATES: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set("banned deprecated disallowed discouraged forbidden obsolete outlawed prohibited")
});

/// Words after "is" that prefer the subject, or with "not" prohibit it ("X is not allowed").
pub(super) const PREFERRED_STATES: &[&str] =
    &["allowed", "mandatory", "permitted", "preferred", "recommended", "required", "standard"];

/// Words that turn a later preference in their clause into a prohibition.
pub(super) static NEGATORS: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "avoid avoided avoiding ban banned forbid forbidden never no nobody not prohibit \
        prohibited quit stop stopped stopping without",
    )
});

/// Words after a negator that cancel it ("don't forget to use", "not only").
pub(super) const CANCELLERS: &[&str] =
    &["afraid", "fail", "forget", "hesitate", "just", "merely", "neglect", "only"];

/// Words that make the rest of their clause a condition, not a statement.
pub(super) const CONDITIONALS: &[&str] =
    &["after", "before", "if", "once", "unless", "until", "when", "whenever", "whether", "while"];

/// Prepositions that limit a statement to some circumstances ("in tests", "for publishing").
pub(super) const QUALIFYING: &[&str] =
    &["across", "during", "for", "in", "inside", "on", "outside", "under", "within"];

/// Words of a qualifier that limit nothing ("in this repo", "for everything").
pub(super) const SCOPE_WORDS: &[&str] = &[
    "code",
    "codebase",
    "everything",
    "file",
    "files",
    "general",
    "monorepo",
    "project",
    "projects",
    "repo",
    "repos",
    "repositories",
    "repository",
    "stuff",
    "things",
];

/// Words that end a clause, as punctuation does.
pub(super) const CLAUSE_WORDS: &[&str] =
    &["although", "but", "however", "that", "though", "whereas", "which", "who"];

/// Common verbs: after "never" or "not" they start an action ("never run `npm publish`"),
/// not a thing prohibited, and after "and" they end a list of preferred things.
pub(super) static ACTION_VERBS: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "add break bump call change check commit create delete deploy disable do downgrade edit \
        enable expose force hardcode import leak let log make merge modify print publish push \
        read rebase release remove rename reset run ship skip store touch update upgrade write",
    )
});

/// Words skipped before an object ("use the", "use only").
pub(super) const OBJECT_STARTERS: &[&str] =
    &["a", "always", "an", "either", "exclusively", "just", "only", "our", "plain", "the"];

/// Words that cannot be part of an object or subject: function words, adverbs, and the words
/// that signal statements.
static BOUNDARY: LazyLock<HashSet<&str>> = LazyLock::new(|| {
    word_set(
        "a about above across after again against all allowed also although always am an and any \
        anymore anything anywhere are as at avoid be because been before being below besides \
        between both but by can could did directly do does during each either else even ever \
        every everything everywhere except exclusively for from globally had has have he her here \
        him his how however i if in instead into is it it's its just let's like locally may me \
        might more most must my necessary needed neither never no nor not now of off on once only \
        onto or other our out over per permitted please possible prefer preferred prefers rather \
        really recommended required same shall she should since so some such supported sure than \
        that that's the their them then there there's these they this those though through to \
        today too under unless until up upon us use used uses using versus via vs was we we're \
        were what when whenever where whereas whether which while who why will with within \
        without would yet you your",
    )
});

pub(super) fn is_boundary(word: &str) -> bool {
    BOUNDARY.contains(word)
}

/// The words of a space-separated list.
fn word_set(words: &'static str) -> HashSet<&'static str> {
    words.split_whitespace().collect()
}

/// A member a name may stand for.
pub(super) struct Named {
    pub(super) group: usize,
    pub(super) member: usize,
    /// Whether the name counts only in a sentence about the group.
    pub(super) ambiguous: bool,
}

/// Every member name, ambiguous or not, to the members it may stand for.
pub(super) static NAMES: LazyLock<HashMap<&'static str, Vec<Named>>> = LazyLock::new(|| {
    let mut names: HashMap<&'static str, Vec<Named>> = HashMap::new();
    for (g, group) in GROUPS.iter().enumerate() {
        for (m, member) in group.members.iter().enumerate() {
            for &name in member.names {
                names.entry(name).or_default().push(Named {
                    group: g,
                    member: m,
                    ambiguous: false,
                });
            }
            for &name in member.ambiguous {
                names.entry(name).or_default().push(Named { group: g, member: m, ambiguous: true });
            }
        }
    }
    names
});

pub(super) fn group_verb(word: &str) -> Option<&'static [usize]> {
    GROUP_VERBS.iter().find(|(stem, _)| word.starts_with(stem)).map(|&(_, groups)| groups)
}

/// Words that start statements, which a negator leaves to them ("never use X").
pub(super) fn is_statement_verb(word: &str) -> bool {
    matches!(
        word,
        "use" | "uses" | "using" | "prefer" | "prefers" | "preferring" | "switch" | "migrate"
    ) || group_verb(word).is_some()
}
