//! The schema's versioned migrations, applied at open under an advisory lock so several
//! daemons starting at once migrate once; each applied file's checksum is kept and checked.
