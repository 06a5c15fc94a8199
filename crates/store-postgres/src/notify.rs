//! The doorbell between daemons: NOTIFY payloads sent by writes, one LISTEN connection per
//! store that turns them into [`cairn_store::ExternalChange`]s, reconnecting when it drops.
