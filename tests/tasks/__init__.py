"""Tests of tasks, models and data sets."""
