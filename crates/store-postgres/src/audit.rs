//! The audit log: entries appended in the transaction of the change they record.
