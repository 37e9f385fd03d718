import { fileURLToPath } from 'node:url';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import type { DockerImageAssetOptions } from 'aws-cdk-lib/aws-ecr-assets';

/** Repository root: where the Dockerfile and the server's sources are. */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * How the server image is built from a checkout. The context is the repository root, narrowed
 * by its `.dockerignore`, an allow-list of what the image build reads: the workspace manifests
 * and lockfile, and the server package's sources and protos (tests left out). The asset hash is
 * taken over that context, so a change under infra/, bench/, test/, examples/, .github/ or any
 * documentation builds no new image and rolls no GPU task (infra/test/image.test.ts).
 */
export const SERVER_IMAGE_ASSET: DockerImageAssetOptions = { file: 'Dockerfile', platform: Platform.LINUX_AMD64 };

/**
 * The Dockerfile's images, chosen by its SERVER_IMAGE build argument: `cuda` (the default) for
 * models on the CUDA and TensorRT providers; `webgpu`, Node and the Vulkan loader without CUDA, for
 * models on the webgpu accelerator.
 */
export type ServerImageTarget = 'cuda' | 'webgpu';
export const SERVER_IMAGE_TARGETS: readonly ServerImageTarget[] = ['cuda', 'webgpu'];

/**
 * What the container needs beside the image, by target: the NVIDIA container runtime mounts the
 * host driver's Vulkan driver (nvidia_icd.json, libGLX_nvidia, libEGL_nvidia: the server uses the
 * EGL one without a display) only when the container's driver capabilities include graphics; the CUDA image's base sets compute,utility itself.
 */
export const SERVER_IMAGE_ENVIRONMENT: Readonly<Record<ServerImageTarget, Readonly<Record<string, string>>>> = {
  cuda: {},
  webgpu: { NVIDIA_DRIVER_CAPABILITIES: 'compute,utility,graphics' },
};

/** The server image built from the repository at `directory` (the repository root by default). */
export function serverImageFromRepository(directory: string = REPOSITORY_ROOT, image: ServerImageTarget = 'cuda'): ecs.AssetImage {
  // The CUDA image is the Dockerfile's default (SERVER_IMAGE=cuda): passing no build argument keeps its asset hash.
  return ecs.ContainerImage.fromAsset(
    directory,
    image === 'cuda' ? SERVER_IMAGE_ASSET : { ...SERVER_IMAGE_ASSET, buildArgs: { SERVER_IMAGE: image } },
  );
}
