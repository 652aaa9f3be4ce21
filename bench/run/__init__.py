"""One process of a run: the training loop, a dist worker's entry point, checkpoints, optimizers."""
