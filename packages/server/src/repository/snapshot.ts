import { createHash } from 'node:crypto';
import { isVersionName } from './model-folder.ts';

/** One file of a repository, as the listing reports it. */
export interface RepositoryObject {
  /** Path inside the model folder: 'config.pbtxt', '3/model.onnx', 'labels.txt'. */
  readonly path: string;
  /** Full S3 key, or the absolute file path for a local repository. */
  readonly key: string;
  readonly size: number;
  /**
   * S3: the ETag without quotes (the MD5 hex only where `etagIsContentMd5` says so).
   * Local: `mtime:<ms>` (local files have no ETag; size and mtime stand in).
   */
  readonly etag: string;
}

export interface VersionListing {
  readonly version: number;
  /** Files of `<model>/<version>/`, sorted by path. */
  readonly files: readonly RepositoryObject[];
  /** Changes when any file of the version is added, removed, resized or rewritten. */
  readonly fingerprint: string;
  readonly totalBytes: number;
}

export interface ModelListing {
  readonly name: string;
  /** config.pbtxt, when the model has one. */
  readonly config: RepositoryObject | undefined;
  /** Fingerprint of config.pbtxt alone (a fixed value when there is none). */
  readonly configFingerprint: string;
  /** Numeric version folders, ascending. */
  readonly versions: readonly VersionListing[];
  /** Other files of the model folder (labels.txt, ...), localized with the model. */
  readonly otherFiles: readonly RepositoryObject[];
  /** Changes when anything in the model folder changes (config, versions, other files). */
  readonly fingerprint: string;
}

/** What one `list()` saw: every model folder, sorted by name. */
export interface RepositorySnapshot {
  readonly location: string;
  readonly models: readonly ModelListing[];
  readonly listedAt: Date;
  /** Listing requests it took (one pagination pass: 1 per 1000 keys). */
  readonly requests: number;
}

export function fingerprintObjects(objects: readonly RepositoryObject[]): string {
  const hash = createHash('sha256');
  for (const o of [...objects].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    hash.update(`${o.path}\0${o.size}\0${o.etag}\n`);
  }
  return hash.digest('hex');
}

/**
 * Groups files by model folder and version. `files` carry a path relative to the
 * repository root ('<model>/<rest>'); folders whose names start with '.' are ignored, as are
 * files directly at the root and directory markers.
 */
export function groupRepositoryObjects(
  location: string,
  files: readonly { readonly relativePath: string; readonly key: string; readonly size: number; readonly etag: string }[],
  requests: number,
): RepositorySnapshot {
  const byModel = new Map<string, { config?: RepositoryObject; versions: Map<number, RepositoryObject[]>; other: RepositoryObject[] }>();
  for (const file of files) {
    if (file.relativePath.endsWith('/')) continue;
    const slash = file.relativePath.indexOf('/');
    if (slash <= 0) continue;
    const name = file.relativePath.slice(0, slash);
    const path = file.relativePath.slice(slash + 1);
    if (name.startsWith('.') || path === '') continue;
    let model = byModel.get(name);
    if (!model) byModel.set(name, (model = { versions: new Map(), other: [] }));
    const object: RepositoryObject = { path, key: file.key, size: file.size, etag: file.etag };
    const firstSegment = path.split('/')[0]!;
    if (path === 'config.pbtxt') model.config = object;
    else if (path.includes('/') && isVersionName(firstSegment)) {
      const version = Number(firstSegment);
      const list = model.versions.get(version) ?? [];
      list.push(object);
      model.versions.set(version, list);
    } else model.other.push(object);
  }
  const models: ModelListing[] = [...byModel.keys()].sort().map((name) => {
    const m = byModel.get(name)!;
    const byPath = (a: RepositoryObject, b: RepositoryObject) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
    const versions: VersionListing[] = [...m.versions.keys()]
      .sort((a, b) => a - b)
      .map((version) => {
        const vfiles = m.versions.get(version)!.sort(byPath);
        return {
          version,
          files: vfiles,
          fingerprint: fingerprintObjects(vfiles),
          totalBytes: vfiles.reduce((sum, f) => sum + f.size, 0),
        };
      });
    const otherFiles = m.other.sort(byPath);
    const configFingerprint = fingerprintObjects(m.config ? [m.config] : []);
    const fingerprint = createHash('sha256')
      .update(`config\0${configFingerprint}\nother\0${fingerprintObjects(otherFiles)}\n`)
      .update(versions.map((v) => `${v.version}\0${v.fingerprint}`).join('\n'))
      .digest('hex');
    return { name, config: m.config, configFingerprint, versions, otherFiles, fingerprint };
  });
  return { location, models, listedAt: new Date(), requests };
}

/** What a GetObject or HeadObject response says about how an object is stored. */
export interface StoredObjectFacts {
  readonly etag: string;
  /** `ServerSideEncryption`: 'AES256' (SSE-S3), 'aws:kms', 'aws:kms:dsse', or none. */
  readonly serverSideEncryption?: string | undefined;
  /** `SSECustomerAlgorithm`: set for SSE-C objects. */
  readonly sseCustomerAlgorithm?: string | undefined;
}

/**
 * Whether the ETag is the MD5 of the object's bytes. S3 makes it so only for objects uploaded
 * in one part and stored unencrypted or with SSE-S3: a multipart ETag is `<hex>-<parts>`, and
 * SSE-KMS, DSSE-KMS and SSE-C objects have 32-hex ETags that are not the MD5 of their bytes.
 */
export function etagIsContentMd5(object: StoredObjectFacts): boolean {
  if (!/^[0-9a-f]{32}$/i.test(object.etag)) return false;
  if (object.sseCustomerAlgorithm) return false;
  const sse = object.serverSideEncryption;
  return sse === undefined || sse === '' || sse === 'AES256';
}

export function unquoteEtag(etag: string | undefined): string {
  return (etag ?? '').replace(/^W\//, '').replace(/^"|"$/g, '');
}
