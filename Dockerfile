# syntax=docker/dockerfile:1.7
# Batchwise server images for ECS GPU instances. Build context: the repository root, narrowed by
# the allow-list in .dockerignore. Two images, chosen by the SERVER_IMAGE build argument: `cuda`
# (the default) for models on the CUDA and TensorRT providers, and `webgpu`
# (docker build --build-arg SERVER_IMAGE=webgpu .), Node and the Vulkan loader without CUDA, for
# models on the webgpu accelerator (docs/operations.md, "GPUs and CUDA"). Either is a base stage of
# the last stage, `server`, which holds the one EXPOSE, ENTRYPOINT and CMD.

# The stage the server image starts from: cuda or webgpu (checked in the server stage, below).
ARG SERVER_IMAGE=cuda

# ---- build: install the server's dependencies, compile it, cut a production-only tree ----
# Node 22: the version Batchwise supports (README, `engines`, CI; test/node-version.test.ts).
FROM node:22-bookworm AS build
# Corepack fails signature checks for this pnpm line; npm installs it fine.
RUN npm i -g pnpm@12.21.0
WORKDIR /src
# The context is an allow-list (.dockerignore): the workspace manifests and lockfile, the
# server package, @batchwise/protocol (sources without tests, protos), @batchwise/backend (what
# JavaScript models import) and @batchwise/client (`batchwise tune`'s load generator). pnpm installs the workspace projects present,
# checking them against the lockfile (--frozen-lockfile); the others are not in the context.
COPY . .
# onnxruntime-node's install script stays disabled here (allowBuilds in pnpm-workspace.yaml);
# its CUDA libraries are fetched below, into the production tree only.
RUN --mount=type=cache,id=pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm install --frozen-lockfile
# Builds @batchwise/protocol, @batchwise/backend and @batchwise/client first (project references of the server).
RUN pnpm exec tsc -b packages/server
# Since pnpm 12.2 deploy works without injected workspace packages: the server package
# (src, dist) plus its production dependencies, @batchwise/protocol among them (its "files": src,
# dist, proto), self-contained. @batchwise/backend lands in the server's node_modules too: the JS
# backend's workers resolve every model's import of it there (a resolve hook), so models from S3,
# which carry no node_modules of ours, find it.
RUN --mount=type=cache,id=pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm --filter @batchwise/server --prod deploy /out/packages/server
# onnxruntime-node ships its native binaries for every platform; the images are linux/amd64
# (infra's asset platform): darwin, win32 and linux/arm64 are some 245 MB of neither.
RUN cd "$(readlink -f /out/packages/server/node_modules/onnxruntime-node)/bin/napi-v6" \
 && rm -rf darwin win32 linux/arm64 \
 && ls linux/x64/libonnxruntime.so.1

# ---- build-cuda: the tree plus the CUDA 12 execution provider libraries (libonnxruntime_providers_cuda.so, ...) from NuGet ----
FROM build AS build-cuda
RUN cd "$(readlink -f /out/packages/server/node_modules/onnxruntime-node)" \
 && ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install \
 && ls bin/napi-v6/linux/x64/libonnxruntime_providers_cuda.so

FROM node:22-bookworm-slim AS node

# ---- webgpu: Node 22 and the Vulkan loader, no CUDA or cuDNN ----
# libonnxruntime.so.1 of onnxruntime-node carries the WebGPU execution provider (Dawn on Vulkan);
# the host's NVIDIA driver brings the Vulkan driver, which the NVIDIA container runtime mounts
# (nvidia_icd.json, libGLX_nvidia, libEGL_nvidia) only when the driver capabilities include graphics.
# Without a display the server uses libEGL_nvidia (docs/gpu-accelerators.md, "Without a display").
FROM node:22-bookworm-slim AS webgpu
# python3 and numpy: the interpreter of Python backend models (docs/python-backend.md).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libvulkan1 python3 python3-numpy \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 batchwise \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/batchwise --shell /usr/sbin/nologin batchwise
WORKDIR /app
COPY --from=build --chown=root:root /out /app
ENV NODE_ENV=production
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics
USER 10001:10001

# ---- cuda: CUDA 12 + cuDNN 9 runtime libraries, Node 22, no build tools ----
# onnxruntime-node 1.30's cuda12 package is built against CUDA 12.x and cuDNN 9 and loads
# libcudart.so.12, libcublas(Lt).so.12, libcufft.so.11, libcurand.so.10 and libcudnn.so.9:
# the cudnn-runtime flavour has exactly these. 12.8 needs an NVIDIA driver >= 570 on the host,
# which the current ECS-Optimized GPU AMIs ship (check `nvidia-smi` when pinning an old AMI).
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04 AS cuda
# Official Node binaries need glibc >= 2.28 and a recent libstdc++; Ubuntu 22.04 has both.
COPY --from=node /usr/local/bin/node /usr/local/bin/node
# python3 and numpy: the interpreter of Python backend models (docs/python-backend.md).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-numpy \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 batchwise \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/batchwise --shell /usr/sbin/nologin batchwise
WORKDIR /app
COPY --from=build-cuda --chown=root:root /out /app
ENV NODE_ENV=production
# Same numeric user as the ECS task definition's `user` (infra/lib/inference-service.ts).
USER 10001:10001

# ---- server: the image that runs, on the stage SERVER_IMAGE names (BuildKit resolves a stage name in FROM) ----
# Any other value is taken as an image reference: an unknown name fails pulling it ("pull access
# denied ... repository does not exist"); an image that exists, or another stage of this file,
# fails at the check below, which names the two accepted values.
FROM ${SERVER_IMAGE} AS server
ARG SERVER_IMAGE
RUN case "$SERVER_IMAGE" in cuda|webgpu) ;; *) echo "SERVER_IMAGE must be cuda or webgpu, got '$SERVER_IMAGE'" >&2; exit 1 ;; esac
EXPOSE 8000 8001 8002
# The workspace packages export their TypeScript sources by default (tests, tsx); Node does not
# strip types under node_modules, so the image takes their compiled dist through the
# batchwise-dist condition (worker threads inherit the flag). test/runtime-image.test.ts builds
# this tree as the steps above do and starts it with this ENTRYPOINT and CMD.
ENTRYPOINT ["node", "--conditions=batchwise-dist", "packages/server/dist/cli/main.js"]
# Local use: docker run --gpus all -v "$PWD/examples/model_repository:/models" -p 8000-8002:8000-8002 <image>
# Local use (webgpu): docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics -v "$PWD/models:/models" -p 8000-8002:8000-8002 <image>
CMD ["serve", "--model-repository", "/models"]
