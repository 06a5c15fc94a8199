//! A throwaway PostgreSQL server for tests (`initdb` into a temporary directory, started with
//! `pg_ctl` on a free port, run as the `postgres` user when we are root), stopped and removed
//! when dropped. Missing binaries are an error that says how to install them, never a skip.
