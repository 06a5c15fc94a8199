#!/bin/sh
# Regenerates fts5-tokens.tsv: what SQLite FTS5's `porter unicode61 remove_diacritics 2`
# tokenizer (the SQLite backend's) makes of each line of fts5-input.txt, by the sqlite3 CLI.
# One output line per input line: its number (from 1), a tab, the tokens separated by spaces.
# fts5-input.txt itself is committed: the LoCoMo development set's vocabulary (one word a
# line, with common English suffixes added), and hand-written lines (accents, tags JSON,
# CJK, emoji, code). Run from this folder.
set -eu
rm -f golden.db
sqlite3 golden.db <<'SQL'
CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE input (line text);
.mode line
.import fts5-input.txt input
INSERT INTO t (rowid, x) SELECT rowid, line FROM input;
CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');
.mode tabs
.headers off
.output fts5-tokens.tsv
SELECT i.rowid, coalesce((SELECT group_concat(term, ' ') FROM
    (SELECT term FROM v WHERE v.doc = i.rowid ORDER BY v.offset)), '')
FROM input i ORDER BY i.rowid;
SQL
rm -f golden.db
