# vLLM's docker guide style: 2 GPUs, TP2, default /dev/shm (no --ipc=host, no --shm-size)
docker run --runtime nvidia --gpus 2 \
    -v ~/.cache/huggingface:/root/.cache/huggingface \
    --env "HUGGING_FACE_HUB_TOKEN=<secret>" \
    -p 8000:8000 \
    vllm/vllm-openai:v0.10.2 \
    --model Qwen/Qwen3-8B --tensor-parallel-size 2
