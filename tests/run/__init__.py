"""Tests of one process: training loop, checkpoints, optimizers."""
