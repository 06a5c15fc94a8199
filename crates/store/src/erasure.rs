//! What erasing a memory takes with it, the same in every backend: each backend deletes the
//! memory's row (its full-text entries, postings and vectors go with it), runs these
//! statements for it, and appends an audit entry that holds none of its text.

/// The statements, in the SQL both backends speak, with `{id}` where the memory's id goes;
/// see [`erasure_statements`].
const ALSO: [&str; 4] = [
    // Packs recalled it: those rows name it.
    "DELETE FROM task_recalls WHERE memory_id = {id}",
    // Its connector item stays, erased, so no sync imports the text again.
    "UPDATE connector_items SET memory_id = '', content_hash = '' WHERE memory_id = {id}",
    // A conflict's reason quotes its memories: it goes with any of them.
    "DELETE FROM conflict_sets WHERE id IN \
     (SELECT conflict_id FROM conflict_members WHERE memory_id = {id})",
    // The audit log keeps that it was written and erased, not what it said.
    "UPDATE audit_log SET before = NULL, after = NULL WHERE memory_id = {id}",
];

/// What an erased memory takes with it besides its row: statements whose one parameter,
/// written `parameter` (`?1`, `$1`), is the memory's id. `per_memory_recalls`: whether the
/// recall log is cleared memory by memory (a backend without an index on it clears it once
/// for the whole erasure instead).
pub fn erasure_statements(parameter: &str, per_memory_recalls: bool) -> Vec<String> {
    ALSO.iter()
        .filter(|statement| per_memory_recalls || !statement.contains("task_recalls"))
        .map(|statement| statement.replace("{id}", parameter))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_take_the_backends_parameter() {
        let sqlite = erasure_statements("?1", false);
        assert_eq!(sqlite.len(), 3);
        assert!(
            sqlite.iter().all(|statement| statement.contains("?1") && !statement.contains('{'))
        );
        let postgres = erasure_statements("$1", true);
        assert_eq!(postgres[0], "DELETE FROM task_recalls WHERE memory_id = $1");
    }
}
