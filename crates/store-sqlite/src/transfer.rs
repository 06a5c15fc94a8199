//! [`cairn_store::transfer::Transfer`] for SQLite: the whole file exported from one read
//! snapshot, so `cairn migrate` can move a solo daemon's data to PostgreSQL.
