"""Tests of tables, paper tables and verdicts, report, performance models."""
