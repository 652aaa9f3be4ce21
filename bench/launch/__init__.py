"""Launchers: how the processes of a run are started (local processes here; Slurm in commbench.launch.slurm)."""
