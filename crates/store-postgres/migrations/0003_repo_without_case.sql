-- Repository names compare case-insensitively (issue 29: `Shop` is `shop`), as `lower(repo)`;
-- the standing rules' index follows. The first migration's index stays for daemons of an
-- earlier release sharing this database during an upgrade.
CREATE INDEX memories_repo_rules_lower ON memories (lower(repo), created_at DESC)
    WHERE scope = 'repo' AND status = 'active' AND archived_at IS NULL;
