//! The full-text tokenizer: SQLite FTS5's `porter unicode61 remove_diacritics 2`, in Rust, so
//! PostgreSQL's postings hold the terms SQLite would index.

mod porter;
