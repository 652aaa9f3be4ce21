"""The results store: records (atomic writes, statuses, safe names) and provenance."""
