"""Tests of records and the committed campaign."""
