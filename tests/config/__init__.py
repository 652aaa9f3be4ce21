"""Tests of settings, grids, run ids."""
