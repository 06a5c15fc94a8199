//! SQLite FTS5's Porter stemmer, ported from its public-domain C.
