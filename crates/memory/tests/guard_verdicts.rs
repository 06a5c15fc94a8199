//! The guard's coverage as data: every command of `data/guard-verdicts.tsv` gets the verdict
//! written beside it from the built-in rules (`cairn_memory::built_in_verdict`), and the
//! table holds at least 400 commands, a third of them harmless ones that must pass silently.

use cairn_memory::built_in_verdict;

const TABLE: &str = include_str!("data/guard-verdicts.tsv");

#[test]
fn every_command_of_the_table_gets_its_verdict() {
    let mut wrong = Vec::new();
    let mut counts = [0usize; 3];
    for (number, line) in TABLE.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.splitn(3, '\t');
        let (Some(verdict), Some(code), Some(command)) =
            (fields.next(), fields.next(), fields.next())
        else {
            panic!("line {}: not `verdict<TAB>code<TAB>command`: {line:?}", number + 1);
        };
        let result = built_in_verdict(command);
        let blockers: Vec<&str> =
            result.blockers.iter().map(|finding| finding.code.as_str()).collect();
        let warnings: Vec<&str> =
            result.warnings.iter().map(|finding| finding.code.as_str()).collect();
        let right = match verdict {
            "block" => {
                counts[0] += 1;
                blockers.contains(&code)
            }
            "warn" => {
                counts[1] += 1;
                blockers.is_empty() && warnings.contains(&code)
            }
            "allow" => {
                counts[2] += 1;
                blockers.is_empty() && warnings.is_empty()
            }
            other => panic!("line {}: unknown verdict {other:?}", number + 1),
        };
        if !right {
            wrong.push(format!(
                "line {}: {command:?} should {verdict} ({code}); blockers {blockers:?}, warnings {warnings:?}",
                number + 1
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of the table's commands got another verdict:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    let total: usize = counts.iter().sum();
    assert!(total >= 400, "the table holds {total} commands");
    assert!(counts[2] * 3 >= total, "harmless commands: {} of {total}", counts[2]);
}
