import { isIP } from 'node:net';
import type { RestrictionTable } from './restricted-api.ts';

/** A frontend serving the model-repository API group: its protocol, where it listens, and its restrictions. */
export interface ModelControlEndpoint {
  readonly protocol: 'http' | 'grpc';
  /** The address it binds: `0.0.0.0`, `::`, `127.0.0.1`, a host name. */
  readonly host: string;
  readonly port: number;
  readonly restrictions: RestrictionTable;
}

/** Whether an address binds the loopback interface only (127.0.0.0/8, ::1, localhost): nothing outside the host reaches it. */
export function isLoopbackAddress(host: string): boolean {
  const address = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (address === 'localhost' || address === '::1') return true;
  const v4 = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/** Whether anyone who reaches the endpoint's address may call load and unload without a key. */
export function isModelControlExposed(endpoint: ModelControlEndpoint): boolean {
  return !endpoint.restrictions.has('model-repository') && !isLoopbackAddress(endpoint.host);
}

/** `http 0.0.0.0:8000`, as a warning or a check names an endpoint. */
export function describeEndpoint(endpoint: Pick<ModelControlEndpoint, 'protocol' | 'host' | 'port'>): string {
  return `${endpoint.protocol} ${endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host}:${endpoint.port}`;
}
