//! Full-text search: the planner of the SQLite backend and BM25 computed in SQL from the
//! postings table, so rankings match SQLite's.
