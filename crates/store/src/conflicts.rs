//! The conflict recorder's decisions, the same for every backend: what recording a found
//! conflict does (nothing, grow the open conflict of its subject and repository, or open a
//! new one), which side a memory joins, and what a dry run reports. Each backend keeps only
//! its queries: which memories its conflicts of the subject already hold, and the open one.

use std::collections::HashSet;

use cairn_types::ConflictSide;

use crate::ConflictRecord;

/// A member of a conflict: a memory's id and the label of its side.
pub type ConflictMember = (String, String);

/// What recording a found conflict does.
#[derive(Debug, Clone, PartialEq)]
pub enum ConflictPlan {
    /// Every memory is in a conflict of the subject already: nothing to record.
    Skip,
    /// The subject's open conflict grows by the `new` memories.
    Grow { open: ConflictRecord, new: Vec<ConflictMember> },
    /// A new conflict of the found one's memories.
    Open { members: Vec<ConflictMember> },
}

/// The memories of `found`, side after side, with their side's label.
pub fn conflict_members(found: &ConflictRecord) -> Vec<ConflictMember> {
    found
        .sides
        .iter()
        .flat_map(|side| side.memory_ids.iter().map(|id| (id.clone(), side.label.clone())))
        .collect()
}

/// The members of `found` that no conflict of its subject and repository holds yet
/// (`known`: the memories those conflicts hold). Empty: nothing to record.
pub fn new_conflict_members(
    found: &ConflictRecord,
    known: &HashSet<String>,
) -> Vec<ConflictMember> {
    conflict_members(found).into_iter().filter(|(id, _)| !known.contains(id)).collect()
}

/// The plan for `found` once its new members are known: grow the subject's `open` conflict,
/// else open one. (With no new members, [`ConflictPlan::Skip`]; a backend asks for the open
/// conflict only when there are new members.)
pub fn plan_conflict(
    found: &ConflictRecord,
    new: Vec<ConflictMember>,
    open: Option<ConflictRecord>,
) -> ConflictPlan {
    if new.is_empty() {
        return ConflictPlan::Skip;
    }
    match open {
        Some(open) => ConflictPlan::Grow { open, new },
        None => ConflictPlan::Open { members: conflict_members(found) },
    }
}

/// What a dry run reports for `found` under `plan`: the conflict as it would stand after
/// recording (the open one grown, with the found one's reason), or nothing.
pub fn planned_conflict(found: &ConflictRecord, plan: ConflictPlan) -> Option<ConflictRecord> {
    match plan {
        ConflictPlan::Skip => None,
        ConflictPlan::Open { .. } => Some(found.clone()),
        ConflictPlan::Grow { mut open, new } => {
            grow_sides(&mut open.sides, &new);
            open.reason = found.reason.clone();
            Some(open)
        }
    }
}

/// Adds `new` members to `sides`: each to the side of its label, or to a new side.
pub fn grow_sides(sides: &mut Vec<ConflictSide>, new: &[ConflictMember]) {
    for (memory_id, label) in new {
        match sides.iter_mut().find(|side| side.label == *label) {
            Some(side) => side.memory_ids.push(memory_id.clone()),
            None => sides
                .push(ConflictSide { label: label.clone(), memory_ids: vec![memory_id.clone()] }),
        }
    }
}

/// The index of the side labelled `label` among `labels` (a conflict's sides in order),
/// added at the end when the conflict has no such side yet.
pub fn side_index(labels: &mut Vec<String>, label: &str) -> usize {
    match labels.iter().position(|known| known == label) {
        Some(side) => side,
        None => {
            labels.push(label.to_owned());
            labels.len() - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_types::{ConflictStatus, Timestamp};

    use super::*;

    fn conflict(id: &str, reason: &str, sides: &[(&str, &[&str])]) -> ConflictRecord {
        ConflictRecord {
            id: id.to_owned(),
            subject: "deploys".to_owned(),
            repo: None,
            sides: sides
                .iter()
                .map(|(label, ids)| ConflictSide {
                    label: (*label).to_owned(),
                    memory_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
                })
                .collect(),
            reason: reason.to_owned(),
            status: ConflictStatus::Open,
            detected_at: Timestamp::from_millis(0),
            resolution: None,
            resolved_at: None,
        }
    }

    #[test]
    fn a_found_conflict_is_skipped_grows_the_open_one_or_opens_one() {
        let found =
            conflict("c2", "Tuesday or Friday", &[("tuesday", &["m1", "m3"]), ("friday", &["m2"])]);
        let all: HashSet<String> = ["m1", "m2", "m3"].map(str::to_owned).into();
        assert_eq!(
            plan_conflict(&found, new_conflict_members(&found, &all), None),
            ConflictPlan::Skip
        );

        let known: HashSet<String> = ["m1", "m2"].map(str::to_owned).into();
        let new = new_conflict_members(&found, &known);
        assert_eq!(new, [("m3".to_owned(), "tuesday".to_owned())]);
        let open = conflict("c1", "old reason", &[("tuesday", &["m1"]), ("friday", &["m2"])]);
        let plan = plan_conflict(&found, new.clone(), Some(open));
        let grown = planned_conflict(&found, plan).unwrap();
        assert_eq!((grown.id.as_str(), grown.reason.as_str()), ("c1", "Tuesday or Friday"));
        assert_eq!(grown.sides[0].memory_ids, ["m1", "m3"]);

        let plan = plan_conflict(&found, new, None);
        assert_eq!(plan, ConflictPlan::Open { members: conflict_members(&found) });
        assert_eq!(planned_conflict(&found, plan), Some(found));
    }

    #[test]
    fn a_new_label_is_a_new_side_at_the_end() {
        let mut labels = vec!["tuesday".to_owned(), "friday".to_owned()];
        assert_eq!(side_index(&mut labels, "friday"), 1);
        assert_eq!(side_index(&mut labels, "monday"), 2);
        assert_eq!(labels, ["tuesday", "friday", "monday"]);
        let mut sides = Vec::new();
        grow_sides(
            &mut sides,
            &[("m1".to_owned(), "a".to_owned()), ("m2".to_owned(), "a".to_owned())],
        );
        assert_eq!(
            sides,
            [ConflictSide { label: "a".to_owned(), memory_ids: vec!["m1".into(), "m2".into()] }]
        );
    }
}
