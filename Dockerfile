# Image for every spade-engine role in compose.yaml (CPU by default; the trainer service adds a GPU).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends util-linux iproute2 libseccomp2 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY spade_engine ./spade_engine
RUN pip install --no-cache-dir -e .
ENV HF_HUB_OFFLINE=1 SPADE_DATA=/data
ENTRYPOINT ["spade-engine"]
