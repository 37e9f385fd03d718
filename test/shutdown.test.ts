import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient } from '@batchwise/client';
import { slowModel } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { startChildServer } from './support/child-server.ts';
import { startTestServer } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

const config = `
name: "slow"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`;

type Outcome = number | 'refused' | 'refused at admission';

const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 256], data: new Array(256).fill(0.1) }] });

/** One request's fate: its status, or how it was refused before the server admitted it. */
async function inferOutcome(url: string, model = 'slow'): Promise<Outcome> {
  try {
    const r = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const text = await r.text();
    // A request routed on a connection that outlived the listener: the protocol's error shape.
    if (r.status === 503 && (JSON.parse(text) as { error?: string }).error === 'Server is shutting down; request not admitted') {
      return 'refused at admission';
    }
    return r.status;
  } catch {
    return 'refused';
  }
}

describe('SIGTERM under load', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'slow', model: slowModel({ repeats: 2000, width: 256 }), config },
      // Batches of seconds, so a backlog is still running when the process is forced out.
      { name: 'slower', model: slowModel({ repeats: 40000, width: 256 }), config: config.replace('"slow"', '"slower"') },
    ]);
  });
  afterAll(() => repo.remove());

  it('goes unready at once, completes every admitted request, and exits 0', async () => {
    const server = await startChildServer(['--model-repository', repo.dir, '--shutdown-grace-secs', '1']);
    const infer = () => inferOutcome(server.url);

    let stop = false;
    const statuses: Outcome[] = [];
    const clients = Array.from({ length: 4 }, async () => {
      while (!stop) statuses.push(await infer());
    });
    await new Promise((r) => setTimeout(r, 500));
    const before = statuses.length;
    server.process.kill('SIGTERM');
    const t0 = Date.now();
    let readyStatus = 200;
    while (Date.now() - t0 < 800) {
      readyStatus = (await fetch(`${server.url}/v2/health/ready`)).status;
      if (readyStatus !== 200) break;
    }
    expect(readyStatus).toBe(400);
    expect(Date.now() - t0).toBeLessThan(500);

    const code = await server.exited;
    stop = true;
    await Promise.all(clients);
    expect(code).toBe(0);
    expect(before).toBeGreaterThan(0);
    // Every request the server admitted completed (200). The others were refused at admission
    // once the grace was over: the connection refused, or a 503 saying the server is closing.
    const failed = statuses.filter((s) => s !== 200 && s !== 'refused' && s !== 'refused at admission');
    expect(failed, JSON.stringify(statuses)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(before);
    expect(server.logs.some((l: any) => l.msg === 'drained; exiting')).toBe(true);
  });

  /** A server with a backlog of slow requests in flight; resolves once some are running. */
  async function busyServer(args: string[]) {
    const server = await startChildServer(['--model-repository', repo.dir, ...args]);
    let stderr = '';
    server.process.stderr!.on('data', (d) => (stderr += d));
    // 'close' comes once its output is read to the end (the log lines), after 'exit'.
    const closed = new Promise<void>((resolve) => server.process.once('close', () => resolve()));
    const requests = Array.from({ length: 48 }, () => inferOutcome(server.url, 'slower'));
    // Until a batch has run: the backlog behind it is then in the server's hands.
    const executions = async () =>
      ((await (await fetch(`${server.url}/v2/models/slower/stats`)).json()) as any).model_stats[0].execution_count;
    while ((await executions()) === 0) await new Promise((r) => setTimeout(r, 50));
    return { server, requests, closed, stderr: () => stderr };
  }

  it('a second SIGTERM exits at once, with runs in flight, without a native abort', async () => {
    const { server, requests, closed, stderr } = await busyServer(['--shutdown-grace-secs', '30', '--exit-timeout-secs', '60']);
    server.process.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 200));
    server.process.kill('SIGTERM');
    const code = await server.exited;
    await Promise.all([closed, ...requests]);
    expect(code).toBeNull();
    expect(server.process.signalCode).toBe('SIGTERM');
    expect(server.logs.map((l: any) => l.msg)).toContain('second signal: exiting now');
    expect(stderr()).not.toMatch(/terminate called|Napi::Error|Aborted/);
  });

  it('the same stop delivered twice at once (a wrapper relays what its process group got) still drains and exits 0', async () => {
    const server = await startChildServer(['--model-repository', repo.dir, '--shutdown-grace-secs', '0']);
    const requests = Array.from({ length: 8 }, () => inferOutcome(server.url));
    const executions = async () =>
      ((await (await fetch(`${server.url}/v2/models/slow/stats`)).json()) as any).model_stats[0].execution_count;
    while ((await executions()) === 0) await new Promise((r) => setTimeout(r, 20));
    server.process.kill('SIGTERM');
    // Apart, as a relay sends it: two signals sent back to back are one to the kernel.
    await new Promise((r) => setTimeout(r, 20));
    server.process.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(await Promise.all(requests)).toEqual(new Array(8).fill(200));
    const messages = server.logs.map((l: any) => l.msg);
    expect(messages).toContain('drained; exiting');
    expect(messages).not.toContain('second signal: exiting now');
  });

  it('the exit timeout forces exit, with runs in flight, without a native abort', async () => {
    const { server, requests, closed, stderr } = await busyServer(['--shutdown-grace-secs', '0', '--exit-timeout-secs', '1']);
    server.process.kill('SIGTERM');
    const code = await server.exited;
    await Promise.all([closed, ...requests]);
    expect(code).toBeNull();
    expect(server.process.signalCode).toBe('SIGTERM');
    expect(server.logs.map((l: any) => l.msg)).toContain('exit timeout reached with requests still in flight: forcing exit');
    expect(stderr()).not.toMatch(/terminate called|Napi::Error|Aborted/);
  });
});

describe('a request refused because the server is stopping', () => {
  it('gets the protocol error shape: 503 {"error"} over HTTP, UNAVAILABLE over gRPC', async () => {
    const server = await startTestServer([EXAMPLES]);
    const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    try {
      expect(await grpc.isServerLive()).toBe(true);
      // A connection whose request headers are still arriving when close() begins is not idle,
      // so it is not closed with the idle ones: its request is routed while the server closes.
      const socket = connect(server.httpPort, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write('POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n');
      await new Promise((r) => setTimeout(r, 100));
      const answer = new Promise<string>((resolve) => {
        let data = '';
        socket.on('data', (d) => (data += d));
        socket.on('close', () => resolve(data));
      });
      const closing = server.close();
      await new Promise((r) => setTimeout(r, 100));
      const body = JSON.stringify({ inputs: [] });
      socket.end(`Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      const reply = await answer;
      expect(reply).toMatch(/^HTTP\/1.1 503 /);
      expect(reply).toMatch(/\r\nconnection: close\r\n/i);
      expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'Server is shutting down; request not admitted' });

      const refused = await grpc.isServerLive().then(
        () => undefined,
        (error: { grpcCode?: number }) => error,
      );
      expect(refused?.grpcCode).toBe(14); // UNAVAILABLE
      await closing;
    } finally {
      await grpc.close();
    }
  });
});

describe('SIGTERM with Python models', () => {
  const SLOW_PY = `
import os, time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.dir = args["model_repository"]
        open(os.path.join(self.dir, "pid-%d" % os.getpid()), "w").close()

    def execute(self, requests):
        stuck = any(pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy().flat[0] == 999 for r in requests)
        time.sleep(600 if stuck else 0.05)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]

    def finalize(self):
        open(os.path.join(self.dir, "finalized-%d" % os.getpid()), "w").close()
`;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'slow_py', config: config.replace('"slow"', '"slow_py"\nbackend: "python"'), files: { '1/model.py': SLOW_PY } },
    ]);
  });
  afterAll(() => repo.remove());

  it('drains them: every admitted request answered, finalize() run in each process, no process left', async () => {
    const { readdir } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const server = await startChildServer(['--model-repository', repo.dir, '--shutdown-grace-secs', '1']);
    let stop = false;
    const statuses: Outcome[] = [];
    const clients = Array.from({ length: 4 }, async () => {
      while (!stop) statuses.push(await inferOutcome(server.url, 'slow_py'));
    });
    await new Promise((r) => setTimeout(r, 500));
    server.process.kill('SIGTERM');
    const code = await server.exited;
    stop = true;
    await Promise.all(clients);
    expect(code).toBe(0);
    const failed = statuses.filter((s) => s !== 200 && s !== 'refused' && s !== 'refused at admission');
    expect(failed, JSON.stringify(statuses)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    const files = await readdir(join(repo.dir, 'slow_py'));
    const pids = files.filter((f) => f.startsWith('pid-')).map((f) => Number(f.slice(4)));
    expect(pids).toHaveLength(2);
    for (const pid of pids) {
      expect(files).toContain(`finalized-${pid}`);
      expect(() => process.kill(pid, 0)).toThrow();
    }
  });

  it('a server killed with SIGKILL mid-execute leaves no Python process behind: each sees its socket close', async () => {
    const { readdir } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const pidFiles = async () => new Set((await readdir(join(repo.dir, 'slow_py'))).filter((f) => f.startsWith('pid-')));
    const earlier = await pidFiles();
    const server = await startChildServer(['--model-repository', repo.dir]);
    const stuckBody = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 256], data: new Array(256).fill(999) }] });
    const stuck = fetch(`${server.url}/v2/models/slow_py/infer`, { method: 'POST', body: stuckBody }).catch(() => 'refused');
    const pids = [...(await pidFiles())].filter((f) => !earlier.has(f)).map((f) => Number(f.slice(4)));
    expect(pids).toHaveLength(2);
    // The stuck execute is under way: only its socket closing can end its process now.
    await new Promise((r) => setTimeout(r, 300));
    server.process.kill('SIGKILL');
    await server.exited;
    expect(await stuck).toBe('refused');
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      await waitFor(async () => !pids.some(alive), 5_000, 'Python processes gone');
    } finally {
      // They ignore SIGTERM: a failed run must not leave them sleeping.
      for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
    }
  });
});
