"""Tests of the command line's errors."""
