"""The Slurm cluster profiles, shipped as package data (commbench.profiles): docs/slurm.md describes them."""
