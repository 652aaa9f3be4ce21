"""What is read back from the records: tables, figures, the report, the papers' tables, performance models."""
