"""Tests of the methods' math, wire formats, transports and hooks."""
