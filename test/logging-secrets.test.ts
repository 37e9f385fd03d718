import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChildServer, type ChildServer } from './support/child-server.ts';
import { EXAMPLES } from './support/repository.ts';

const SECRET = 'SUPERSECRET123';
const FLOAT_MARKER = 12345.678;
const BYTES_MARKER = 'TENSORDATA_MARKER';

describe('logs carry neither secrets nor tensor data', () => {
  let server: ChildServer;
  let output = '';
  beforeAll(async () => {
    server = await startChildServer([
      '--model-repository', EXAMPLES,
      '--http-restricted-api', `model-repository:admin-key=${SECRET}`,
      '--log-verbose', '1',
    ]);
    server.process.stdout!.on('data', (d) => (output += d));
    server.process.stderr!.on('data', (d) => (output += d));
  });
  afterAll(async () => {
    server.process.kill('SIGTERM');
    await server.exited;
  });

  it('after good, failing and refused requests', async () => {
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    await post('/v2/models/identity_bytes/infer', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: [BYTES_MARKER] }] });
    await post('/v2/models/identity_fp32/infer', { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [FLOAT_MARKER, FLOAT_MARKER, 1] }] });
    await post('/v2/models/identity_bytes/infer', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], data: [BYTES_MARKER] }] });
    await post('/v2/repository/index', {}, { 'admin-key': 'wrong-key' });
    await post('/v2/repository/index', {}, { 'admin-key': SECRET });
    // The server's logs in this run; give the pipes a moment.
    await new Promise((r) => setTimeout(r, 300));
    const logged = `${output}\n${JSON.stringify(server.logs)}`;
    expect(logged.length).toBeGreaterThan(100);
    expect(logged).not.toContain(SECRET);
    expect(logged).not.toContain(BYTES_MARKER);
    expect(logged).not.toContain(String(FLOAT_MARKER));
  });
});
