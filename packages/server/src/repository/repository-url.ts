import { resolve } from 'node:path';

/** A model repository on the local disk (Triton layout). */
export interface LocalRepositoryLocation {
  readonly kind: 'local';
  /** Absolute path of the repository folder. */
  readonly path: string;
}

/**
 * A model repository under an S3 prefix. `endpoint` is set only for Triton's
 * `s3://host:port/bucket/prefix` form (S3-compatible servers, path-style addressing);
 * without it the SDK's standard endpoint settings apply (AWS_ENDPOINT_URL_S3, profiles, ...).
 */
export interface S3RepositoryLocation {
  readonly kind: 's3';
  readonly bucket: string;
  /** Key prefix of the repository: '' for the bucket root, else ends with '/'. */
  readonly prefix: string;
  /** e.g. `http://127.0.0.1:4568`; undefined means the SDK decides. */
  readonly endpoint?: string;
  /** True with an explicit endpoint (S3-compatible servers rarely do virtual hosts). */
  readonly forcePathStyle: boolean;
  /** The location as given, for logs and errors. */
  readonly url: string;
}

export type RepositoryLocation = LocalRepositoryLocation | S3RepositoryLocation;

export class RepositoryLocationError extends Error {
  override readonly name = 'RepositoryLocationError';
}

// Triton's own grammar (filesystem/implementations/s3.h): s3://[http(s)://]host:port/bucket[/path]
const ENDPOINT_FORM = /^(?:(https?):\/\/)?([0-9A-Za-z.-]+|\[[0-9A-Fa-f:.]+\]):([0-9]+)\/(.*)$/;
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;

/**
 * Parses a `--model-repository` value: a local path, `s3://bucket/prefix`,
 * `s3://host:port/bucket/prefix` (HTTP, path-style) or `s3://https://host:port/bucket/prefix`.
 * Throws RepositoryLocationError naming what is wrong.
 */
export function parseRepositoryLocation(location: string): RepositoryLocation {
  const fail = (why: string): never => {
    throw new RepositoryLocationError(`invalid model repository '${location}': ${why}`);
  };
  if (location.trim() === '') fail('empty location');
  const scheme = SCHEME.exec(location)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    if (/^s3:/i.test(location)) fail("an S3 location starts with 's3://'");
    return { kind: 'local', path: resolve(location) };
  }
  if (scheme === 'file') return { kind: 'local', path: resolve(decodeURIComponent(location.slice('file://'.length))) };
  if (scheme !== 's3') fail(`unsupported scheme '${scheme}://' (supported: a local path, s3://)`);

  const rest = location.slice('s3://'.length);
  const endpointMatch = ENDPOINT_FORM.exec(rest);
  let endpoint: string | undefined;
  let path: string;
  if (endpointMatch) {
    const [, protocol = 'http', host, portText, after] = endpointMatch;
    const port = Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535) fail(`port ${portText} is outside 1..65535`);
    endpoint = `${protocol}://${host}:${port}`;
    path = after!;
  } else {
    if (/^https?:\/\//i.test(rest)) fail("an endpoint needs a port: 's3://https://host:port/bucket/prefix'");
    path = rest;
  }
  const slash = path.indexOf('/');
  const bucket = slash < 0 ? path : path.slice(0, slash);
  const keyPath = slash < 0 ? '' : path.slice(slash + 1);
  if (bucket === '') fail('no bucket name');
  if (bucket.includes(':')) fail(`'${bucket}' is not a bucket name (for an endpoint write 's3://host:port/bucket/prefix')`);
  if (!BUCKET.test(bucket) || bucket.includes('..')) {
    fail(`'${bucket}' is not a valid bucket name (3-63 characters: lowercase letters, digits, dots, hyphens)`);
  }
  const segments = keyPath.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '.' || s === '..')) fail("the prefix may not contain '.' or '..' segments");
  if (/[?#]/.test(keyPath)) fail("the prefix may not contain '?' or '#'");
  const prefix = segments.length > 0 ? `${segments.join('/')}/` : '';
  return {
    kind: 's3',
    bucket,
    prefix,
    ...(endpoint !== undefined && { endpoint }),
    forcePathStyle: endpoint !== undefined,
    url: location,
  };
}

/** The location written back as a URL (local paths as they are). */
export function formatRepositoryLocation(location: RepositoryLocation): string {
  if (location.kind === 'local') return location.path;
  const host = location.endpoint ? `${location.endpoint.replace(/^http:\/\//, '')}/` : '';
  return `s3://${host}${location.bucket}/${location.prefix}`;
}
