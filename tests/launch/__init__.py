"""Tests of processes, Slurm, emulated networks, failures."""
