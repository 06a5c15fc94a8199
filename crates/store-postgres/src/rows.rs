//! Conversions between PostgreSQL rows and Cairn's memory types.
