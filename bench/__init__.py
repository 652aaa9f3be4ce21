"""How experiments run: configuration and grids, the training loop, launchers, records, tables, the CLI."""
