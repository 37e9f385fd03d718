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

/** The server image built from the repository at `directory` (the repository root by default). */
export function serverImageFromRepository(directory: string = REPOSITORY_ROOT): ecs.AssetImage {
  return ecs.ContainerImage.fromAsset(directory, SERVER_IMAGE_ASSET);
}
