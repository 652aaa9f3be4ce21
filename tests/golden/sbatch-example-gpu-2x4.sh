#!/bin/bash

# Parameters
#SBATCH --account=my-project
#SBATCH --array=0-2%3
#SBATCH --chdir=/scratch/sweeps/out/slurm/code/0123456789ab
#SBATCH --constraint=a100
#SBATCH --cpus-per-task=8
#SBATCH --error=/scratch/sweeps/out/slurm/batches/b1/%A_%a/%A_%a_0_log.err
#SBATCH --exclusive
#SBATCH --gpus-per-node=4
#SBATCH --job-name=commbench-example
#SBATCH --mail-type=FAIL
#SBATCH --mem=480GB
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --open-mode=append
#SBATCH --output=/scratch/sweeps/out/slurm/batches/b1/%A_%a/%A_%a_0_log.out
#SBATCH --partition=gpu
#SBATCH --qos=normal
#SBATCH --requeue
#SBATCH --signal=USR2@180
#SBATCH --time=1440
#SBATCH --wckey=submitit

# setup
module load cuda/12.4
export NCCL_DEBUG=WARN
export PYTHONDONTWRITEBYTECODE=1
export COMMBENCH_GIT_SHA=0123456789abcdef0123456789abcdef01234567
export COMMBENCH_GIT_DIRTY=0
export NUMBA_CACHE_DIR="${HOME:-/tmp}/.cache/commbench/numba"
export PYTHONPATH=/scratch/sweeps/out/slurm/code/0123456789ab${PYTHONPATH:+:$PYTHONPATH}

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /scratch/sweeps/out/slurm/batches/b1/%A_%a/%A_%a_%t_log.out --error /scratch/sweeps/out/slurm/batches/b1/%A_%a/%A_%a_%t_log.err --kill-on-bad-exit=1 python -u -m submitit.core._submit /scratch/sweeps/out/slurm/batches/b1/%j
