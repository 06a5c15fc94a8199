//! Locks shared by every daemon on the database: session advisory locks held on a dedicated
//! connection until the guard is dropped.
