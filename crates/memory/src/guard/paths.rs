//! Where a path points, as far as its text tells (`classify`), and the rules judged by it:
//! recursive deletes (`rm`, `find`), permission changes, and writes over disks.

use super::{Arguments, Findings};
use crate::shell::{self, Command, Script};

/// Where a path points, as far as its text tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// `/` or everything in it.
    Root,
    /// A home directory or everything in it: `~`, `$HOME`, `/home/alice`.
    Home,
    /// A top-level system directory: `/usr`, `/etc`, `/var`, `/*`.
    System,
    /// The current or parent directory or everything in it: `.`, `..`, `*`, `./*`.
    Here,
    /// Outside the project: another absolute path, `../x`, `~/x`.
    Elsewhere,
    /// Built from a variable or a command: `$DIR/x`, `$(pwd)`.
    Unknown,
    /// Inside the project, or scratch space under `/tmp/`.
    Inside,
}

impl Target {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Target::Root => "every file on the machine",
            Target::Home => "a home directory",
            Target::System => "a system directory",
            Target::Here => "everything in the current or parent directory",
            Target::Elsewhere => "a directory outside the project",
            Target::Unknown => "a path built from a variable or a command",
            Target::Inside => "a path inside the project",
        }
    }

    /// `/`, a home, or a system directory: never to delete or change wholesale.
    pub(super) fn is_vital(self) -> bool {
        matches!(self, Target::Root | Target::Home | Target::System)
    }
}

/// Top-level directories the system needs (Linux and macOS).
pub(super) const SYSTEM_DIRECTORIES: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "usr",
    "var",
    "Applications",
    "Library",
    "System",
    "Users",
    "Volumes",
    "private",
    "cores",
];

pub(super) fn classify(path: &str) -> Target {
    let path = path.trim();
    if path.contains("$(") || path.contains('`') {
        return Target::Unknown;
    }
    let path = home_relative(path);
    if path.starts_with('$') {
        return Target::Unknown;
    }
    let (anchor, rest) = if let Some(rest) = path.strip_prefix('/') {
        ("/", rest)
    } else if path.starts_with('~') {
        // `~`, `~/x` and `~alice/x` are all homes.
        ("~", path.split_once('/').map_or("", |(_, rest)| rest))
    } else {
        ("", path.as_str())
    };
    let mut components: Vec<&str> =
        rest.split('/').filter(|component| !component.is_empty() && *component != ".").collect();
    // A trailing glob means everything in the directory before it.
    while components.last().is_some_and(|last| is_glob_only(last)) {
        components.pop();
    }
    let mut resolved: Vec<&str> = Vec::new();
    let mut escapes = false;
    for component in components {
        if component == ".." {
            escapes |= resolved.pop().is_none();
        } else {
            resolved.push(component);
        }
    }
    match anchor {
        "/" => match resolved.as_slice() {
            [] => Target::Root,
            [top] if SYSTEM_DIRECTORIES.contains(top) || top.contains(['*', '?', '[']) => {
                Target::System
            }
            ["home" | "Users", _] => Target::Home,
            ["tmp", _, ..] => Target::Inside,
            _ => Target::Elsewhere,
        },
        "~" if resolved.is_empty() || escapes => Target::Home,
        "~" => Target::Elsewhere,
        _ if resolved.is_empty() => Target::Here,
        _ if escapes => Target::Elsewhere,
        _ => Target::Inside,
    }
}

/// `$HOME/x` and `${HOME}/x` as `~/x`.
fn home_relative(path: &str) -> String {
    for home in ["$HOME", "${HOME}"] {
        if let Some(rest) = path.strip_prefix(home)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("~{rest}");
        }
    }
    path.to_owned()
}

/// `*`, `.*`, `?`: a component that matches every name.
fn is_glob_only(component: &str) -> bool {
    component.trim_start_matches('.').chars().all(|c| c == '*' || c == '?')
        && component.contains(['*', '?'])
}

pub(super) fn check_rm(command: &Command, findings: &mut Findings) {
    let arguments = Arguments::read(command.args());
    let recursive = arguments.short('r') || arguments.short('R') || arguments.long("--recursive");
    if !recursive {
        return;
    }
    let display = command.display();
    if arguments.long("--no-preserve-root") {
        findings.block(
            "DESTRUCTIVE_DELETE",
            format!("`{display}` turns off rm's protection of `/` and can delete every file on the machine"),
        );
        return;
    }
    if arguments.operands.is_empty() && command.runners.iter().any(|runner| runner == "xargs") {
        findings.warn(
            "RECURSIVE_DELETE",
            format!("`xargs {display}` deletes whatever its input names: check the list first"),
        );
        return;
    }
    for operand in arguments.operands {
        report_delete(&format!("`{display}`"), classify(operand), findings);
    }
}

pub(super) fn report_delete(who: &str, target: Target, findings: &mut Findings) {
    match target {
        Target::Root | Target::Home | Target::System | Target::Here => {
            findings.block("DESTRUCTIVE_DELETE", format!("{who} deletes {}", target.describe()))
        }
        Target::Elsewhere | Target::Unknown => findings.warn(
            "RECURSIVE_DELETE",
            format!("{who} deletes {}: check the path before running it", target.describe()),
        ),
        Target::Inside => {}
    }
}

/// Programs that delete the files they are given.
const DELETERS: &[&str] = &["rm", "rmdir", "unlink", "shred"];

/// `find` tests that narrow what it matches (unlike `-type`, which keeps whole trees).
const FIND_FILTERS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-newer",
    "-size",
    "-user",
    "-group",
    "-perm",
    "-empty",
    "-links",
    "-inum",
    "-lname",
    "-samefile",
];

pub(super) fn check_find(command: &Command, script: &Script, findings: &mut Findings) {
    let args = command.args();
    let mut roots = Vec::new();
    let mut index = 0;
    while let Some(word) = args.get(index) {
        match word.text.as_str() {
            "-H" | "-L" | "-P" => {}
            "-D" => index += 1,
            option if option.starts_with("-O") => {}
            expression if expression.starts_with('-') || matches!(expression, "(" | "!" | ",") => {
                break;
            }
            root => roots.push(root),
        }
        index += 1;
    }
    let expression = args.get(index..).unwrap_or_default();
    let executes_deleter = expression.windows(2).any(|pair| {
        matches!(pair[0].text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
            && DELETERS.contains(&shell::file_name(&pair[1].text))
    });
    let piped_to_deleter = script.commands.iter().any(|other| {
        other.pipeline == command.pipeline
            && other.position > command.position
            && other.runners.iter().any(|runner| runner == "xargs")
            && DELETERS.contains(&other.program())
    });
    let deletes = expression.iter().any(|word| word.text == "-delete");
    if !(deletes || executes_deleter || piped_to_deleter) {
        return;
    }
    if roots.is_empty() {
        roots.push(".");
    }
    let filtered = expression.iter().any(|word| FIND_FILTERS.contains(&word.text.as_str()));
    let display = command.display();
    for root in roots {
        match classify(root) {
            Target::Root | Target::Home | Target::System => findings.block(
                "DESTRUCTIVE_DELETE",
                format!("`{display}` deletes every file under `{root}`"),
            ),
            Target::Here if !filtered => findings.block(
                "DESTRUCTIVE_DELETE",
                format!("`{display}` deletes every file under `{root}`"),
            ),
            target @ (Target::Elsewhere | Target::Unknown) => findings.warn(
                "RECURSIVE_DELETE",
                format!(
                    "`{display}` deletes files under `{root}`, {}: check the path before running it",
                    target.describe()
                ),
            ),
            Target::Here | Target::Inside => {}
        }
    }
}

pub(super) fn check_permissions(program: &str, command: &Command, findings: &mut Findings) {
    let mut recursive = false;
    let mut by_reference = false;
    let mut operands = Vec::new();
    let mut options_done = false;
    for word in command.args() {
        let text = word.text.as_str();
        let letters = text.strip_prefix('-').filter(|letters| !letters.is_empty());
        match letters {
            _ if options_done => operands.push(text),
            Some("-") => options_done = true,
            Some(long) if long.starts_with('-') => {
                recursive |= long == "-recursive";
                by_reference |= long.starts_with("-reference");
            }
            // `chmod -w file`: a mode, not options.
            Some(mode) if program == "chmod" && mode.chars().all(|c| "rwxXst".contains(c)) => {
                operands.push(text);
            }
            Some(letters) => recursive |= letters.contains('R'),
            None => operands.push(text),
        }
    }
    let (mode, targets) = match operands.split_first() {
        Some((first, rest)) if !by_reference => (Some(*first), rest),
        _ => (None, operands.as_slice()),
    };
    let display = command.display();
    let what = match program {
        "chmod" => "permissions",
        "chown" => "owner",
        _ => "group",
    };
    if recursive {
        let vital = targets.iter().map(|target| classify(target)).find(|target| target.is_vital());
        if let Some(target) = vital {
            findings.block(
                "SYSTEM_PERMISSIONS",
                format!("`{display}` changes the {what} of {}", target.describe()),
            );
            return;
        }
    }
    if program == "chmod" && mode.is_some_and(is_world_writable) {
        findings.warn("WORLD_WRITABLE", format!("`{display}` makes files writable by everyone"));
    }
}

/// An octal mode whose last digit has the write bit, or a symbolic one giving `o` or `a` `w`.
fn is_world_writable(mode: &str) -> bool {
    if !mode.is_empty() && mode.chars().all(|c| c.is_digit(8)) {
        return mode.chars().last().and_then(|c| c.to_digit(8)).is_some_and(|digit| digit & 2 != 0);
    }
    mode.split(',').any(|clause| {
        let operator = clause.find(['+', '=']);
        operator.is_some_and(|at| {
            let (who, permissions) = clause.split_at(at);
            who.contains(['a', 'o']) && permissions.contains('w')
        })
    })
}

/// A disk or partition device: `/dev/sda`, `/dev/nvme0n1p1`, `/dev/disk2`.
pub(super) fn is_disk(path: &str) -> bool {
    const DISKS: &[&str] =
        &["sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "md", "dm-", "mapper/"];
    path.strip_prefix("/dev/").is_some_and(|name| DISKS.iter().any(|disk| name.starts_with(disk)))
}

pub(super) fn check_dd(command: &Command, findings: &mut Findings) {
    let output = command.args().iter().find_map(|word| word.text.strip_prefix("of="));
    if let Some(device) = output.filter(|device| is_disk(device)) {
        findings.block(
            "DISK_OVERWRITE",
            format!(
                "`{}` writes over the disk `{device}`, destroying its file system",
                command.display()
            ),
        );
    }
}

/// `mkfs`, `wipefs`, `shred` and the like: destructive when given a disk.
pub(super) fn check_disk_tool(command: &Command, findings: &mut Findings) {
    let arguments = Arguments::read(command.args());
    if let Some(device) = arguments.operands.iter().find(|operand| is_disk(operand)) {
        findings.block(
            "DISK_OVERWRITE",
            format!("`{}` destroys the file system and data on `{device}`", command.display()),
        );
    }
}
