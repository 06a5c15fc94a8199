//! The rules for infrastructure and the machine itself: `terraform`, `pulumi`, `kubectl` and
//! `helm` destroying what they manage, and shutdowns and reboots.

use super::{Arguments, Findings, positionals};
use crate::shell::Command;

pub(super) fn check_infrastructure(program: &str, command: &Command, findings: &mut Findings) {
    const KUBECTL_VALUES: &[&str] = &[
        "-n",
        "--namespace",
        "--context",
        "--cluster",
        "--user",
        "-l",
        "--selector",
        "-f",
        "--filename",
        "-o",
        "--output",
        "--kubeconfig",
        "-s",
        "--server",
        "--field-selector",
        "--kube-context",
    ];
    /// Kinds whose deletion takes their data with them.
    const DATA_KINDS: &[&str] =
        &["pvc", "pv", "persistentvolumeclaim", "persistentvolume", "statefulset"];
    let args = command.args();
    let display = command.display();
    let options = Arguments::read(args);
    let (code, message) = match (program, positionals(args, KUBECTL_VALUES).as_slice()) {
        ("terraform" | "tofu", ["destroy", ..]) => (
            "INFRASTRUCTURE_DESTROY",
            format!("`{display}` destroys every resource the configuration manages"),
        ),
        ("terraform" | "tofu", ["apply", ..]) if options.long("-destroy") => (
            "INFRASTRUCTURE_DESTROY",
            format!("`{display}` destroys every resource the configuration manages"),
        ),
        ("pulumi", ["destroy", ..]) => {
            ("INFRASTRUCTURE_DESTROY", format!("`{display}` destroys every resource of the stack"))
        }
        ("kubectl", ["delete", kind, ..])
            if matches!(*kind, "namespace" | "namespaces" | "ns")
                || kind.starts_with("namespace/")
                || kind.starts_with("ns/") =>
        {
            (
                "INFRASTRUCTURE_DESTROY",
                format!("`{display}` deletes the namespace and everything in it"),
            )
        }
        ("kubectl", ["delete", ..])
            if options.long("--all") || options.long("--all-namespaces") || options.short('A') =>
        {
            ("INFRASTRUCTURE_DESTROY", format!("`{display}` deletes every matching resource"))
        }
        ("kubectl", ["delete", kind, ..])
            if DATA_KINDS.iter().any(|data| kind.starts_with(data)) =>
        {
            ("CLUSTER_DELETE", format!("`{display}` deletes volumes and the data in them"))
        }
        ("helm", [verb, ..]) if matches!(*verb, "uninstall" | "delete" | "del" | "un") => {
            ("CLUSTER_DELETE", format!("`{display}` removes a release and its resources"))
        }
        _ => return,
    };
    findings.warn(code, message);
}

pub(super) fn check_power(program: &str, command: &Command, findings: &mut Findings) {
    let args: Vec<&str> = command.args().iter().map(|word| word.text.as_str()).collect();
    let shuts_down = match program {
        "shutdown" => !args.contains(&"-c"),
        "init" | "telinit" => matches!(args.first(), Some(&("0" | "6"))),
        "systemctl" => positionals(command.args(), &[]).first().is_some_and(|verb| {
            matches!(*verb, "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot")
        }),
        _ => true,
    };
    if shuts_down {
        findings.warn(
            "SHUTDOWN",
            format!("`{}` shuts down or restarts the machine", command.display()),
        );
    }
}
