"""The results store: records (atomic writes, statuses, safe names), the results folder's layout and provenance."""
