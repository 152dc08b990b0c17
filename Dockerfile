# CPU image of the translation server. The training sidecar runs the same image with
# `command: ["python", "-m", "trainer"]` (docker-compose.yml, deploy/k8s/trainer-deployment.yaml).
#
#   docker build -t nmt-server .
#   docker run -p 8000:8000 -v nmt-store:/data -e NMT_ADMIN_TOKEN=... nmt-server
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 nmt \
    && useradd --system --uid 10001 --gid nmt --create-home --home-dir /home/nmt nmt

WORKDIR /app

# torch first, from PyTorch's CPU index: on PyPI the same pin (torch==2.13.0) is the CUDA build,
# which drags in several GB of nvidia-* wheels. 2.13.0+cpu satisfies the pyproject pin.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

# Dependencies before sources, so that editing code does not invalidate this layer.
# EXTRAS: optional dependency groups of pyproject.toml, comma-separated (`ray` for the Ray
# Serve image of deploy/ray/rayservice.yaml).
ARG EXTRAS=""
COPY pyproject.toml ./
RUN python -c "import os, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; extras = [e for e in os.environ['EXTRAS'].split(',') if e]; print('\n'.join(p['dependencies'] + [d for e in extras for d in p['optional-dependencies'][e]]))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY contract ./contract
COPY launch ./launch
COPY server ./server
COPY model_store ./model_store
COPY converters ./converters
COPY trainer ./trainer
COPY benchmarks ./benchmarks
RUN pip install --no-deps . \
    && rm -rf /app/build /app/*.egg-info

# The writable store (artifacts + SQLite registry) lives on a volume; built-in artifacts ship
# read-only inside the installed model_store package.
RUN mkdir -p /data/store && chown -R nmt:nmt /data
ENV NMT_STORE_DIR=/data/store
VOLUME /data

# Numeric, so that Kubernetes' runAsNonRoot can verify it (10001 = nmt).
USER 10001:10001
WORKDIR /home/nmt
EXPOSE 8000

# slim has no curl: python's urllib fails (non-zero exit) on any non-2xx answer or timeout.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health/live', timeout=4)"]

# Every interface of the container, for a published port to reach it (outside a container
# the server listens on 127.0.0.1 unless told otherwise).
CMD ["python", "-m", "server", "--host", "0.0.0.0", "--port", "8000"]
