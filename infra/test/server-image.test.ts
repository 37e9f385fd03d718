import { describe, expect, it } from 'vitest';
import { AssetManifestArtifact } from 'aws-cdk-lib/cx-api';
import { buildApp, IMAGE_URI, REQUIRED, only, synth } from './synth.ts';

const container = (context: Record<string, unknown>) =>
  only(synth({ ...REQUIRED, ...context }).template, 'AWS::ECS::TaskDefinition').props.ContainerDefinitions[0];

/** The container images of the synthesized app's asset manifests, as `cdk deploy` would build them. */
function imageAssets(context: Record<string, unknown>): { file?: string; buildArgs?: Record<string, string>; target?: string }[] {
  // Without staging: the assets point at the repository instead of copies of it.
  const { app } = buildApp({ ...REQUIRED, ...context, 'aws:cdk:disable-asset-staging': true });
  return app
    .synth()
    .artifacts.filter((a): a is AssetManifestArtifact => a instanceof AssetManifestArtifact)
    .flatMap((manifest) => Object.values(manifest.contents.dockerImages ?? {}))
    .map(({ source }) => ({ file: source.dockerFile, buildArgs: source.dockerBuildArgs, target: source.dockerBuildTarget }));
}

describe('the server image, chosen by the serverImage context key', () => {
  it('builds the Dockerfile’s default (CUDA) image by default, passing no build argument (its asset hash stays)', () => {
    expect(imageAssets({})).toEqual([{ file: 'Dockerfile', buildArgs: undefined, target: undefined }]);
  });

  it('builds the webgpu image with SERVER_IMAGE=webgpu, and gives its container the graphics driver capability Vulkan needs', () => {
    expect(imageAssets({ serverImage: 'webgpu' })).toEqual([
      { file: 'Dockerfile', buildArgs: { SERVER_IMAGE: 'webgpu' }, target: undefined },
    ]);
    const environment = container({ serverImage: 'webgpu', imageUri: IMAGE_URI }).Environment;
    expect(environment).toContainEqual({ Name: 'NVIDIA_DRIVER_CAPABILITIES', Value: 'compute,utility,graphics' });
    // Still one GPU per task: the NVIDIA runtime gives the container that GPU and its Vulkan driver.
    expect(container({ serverImage: 'webgpu', imageUri: IMAGE_URI }).ResourceRequirements).toEqual([{ Type: 'GPU', Value: '1' }]);
  });

  it('passes cdk-nag with the webgpu image', () => {
    expect(synth({ ...REQUIRED, serverImage: 'webgpu', imageUri: IMAGE_URI }).violations).toEqual([]);
  });
});
