#!/bin/bash
#SBATCH --job-name=sglang-dsv3
#SBATCH --nodes=2
#SBATCH --gres=gpu:h100:8
#SBATCH --mem=1000G
#SBATCH --time=24:00:00

MODEL=deepseek-ai/DeepSeek-V3
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)

srun --ntasks-per-node=1 bash -c "python -m sglang.launch_server --model-path $MODEL --tp 16 \
  --dist-init-addr $HEAD:5000 --nnodes $SLURM_NNODES --node-rank \$SLURM_NODEID --trust-remote-code \
  --mem-fraction-static 0.85 --enable-hierarchical-cache --hicache-size 100"
