//! [`cairn_store::transfer::Transfer`] for PostgreSQL: export in one snapshot, import into an
//! empty schema.
