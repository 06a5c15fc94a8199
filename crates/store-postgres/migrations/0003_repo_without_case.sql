-- Repository names compare case-insensitively (issue 29: `Shop` is `shop`), as `lower(repo)`.
-- A plain index on the expression, not a partial one: ANALYZE gathers the expression's
-- statistics only for a plain index, and without them the planner guessed a dozen memories
-- a repository and sorted all of a large one's (10 times slower at 10,000 memories); with
-- them it reads a repository's newest memories in creation order. The first migration's
-- index stays for daemons of an earlier release sharing this database during an upgrade.
CREATE INDEX memories_repo_lower ON memories (lower(repo));
