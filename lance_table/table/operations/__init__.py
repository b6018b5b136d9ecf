"""The operations a dataset runs: writes, deletes, updates, merges, schema changes, maintenance."""
