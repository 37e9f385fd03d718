import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { WorkerLike } from '../worker-supervision.ts';
import { encodeFrame, FrameReader } from './frames.ts';
import type { FromStub, ToStub } from './protocol.ts';
import { ShmRegions } from './shm-regions.ts';

/**
 * The stub's Python files: beside this module when it runs from source; a compiled build
 * (dist/backends/python) finds them in the package's src, which ships with it.
 */
export const STUB_DIR = (() => {
  const beside = fileURLToPath(new URL('./stub/', import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL('../../../src/backends/python/stub/', import.meta.url));
})();

/** How long a dead process's socket may take to deliver what the process wrote before its death is reported. */
const SOCKET_DRAIN_MS = 200;

/** A message of the stub with its frame's data (tensors of a response or a call). */
export interface StubMessage {
  readonly message: FromStub;
  readonly data: Buffer;
}

export interface StubSpec {
  /** The interpreter: the host's python3, or one of an EXECUTION_ENV_PATH. */
  readonly python: string;
  /** Environment of the process (an execution environment's PATH and VIRTUAL_ENV). */
  readonly env: NodeJS.ProcessEnv;
  readonly shmDefaultBytes: number;
  readonly shmGrowthBytes: number;
  /** Where the model's prints and its stub's messages go, with the model and instance named. */
  readonly logger: Logger;
}

/**
 * One Python process running one model instance (stub/stub.py), seen as a worker: `postMessage`
 * sends a frame, 'message' events carry the stub's (StubMessage), 'error' says how it died and
 * 'exit' follows. Its stdout and stderr lines are logged; its shared-memory regions are its own.
 */
export class StubProcess extends EventEmitter implements WorkerLike {
  readonly regions: ShmRegions;
  private readonly child: ChildProcess;
  private readonly socket: Socket;
  private exitCode: number | undefined;
  private readonly exited: Promise<number>;

  constructor(spec: StubSpec) {
    super();
    // 'error' reports a death; supervision listens once the model has loaded, this one before.
    this.on('error', () => undefined);
    this.regions = new ShmRegions(spec.shmDefaultBytes, spec.shmGrowthBytes);
    this.child = spawn(spec.python, ['-u', `${STUB_DIR}stub.py`], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...spec.env, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
    });
    this.socket = this.child.stdio[3] as Socket;
    this.socket.setNoDelay?.(true);
    const reader = new FrameReader();
    this.socket.on('data', (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) this.emit('message', { message: frame.header as FromStub, data: frame.data });
    });
    // A socket error means the process is going: its exit reports the death.
    this.socket.on('error', () => undefined);
    for (const [stream, level] of [
      [this.child.stdout, 'info'],
      [this.child.stderr, 'warn'],
    ] as const) {
      if (stream)
        createInterface({ input: stream }).on('line', (line) =>
          spec.logger[level]({ stream: level === 'info' ? 'stdout' : 'stderr' }, line),
        );
    }
    this.exited = new Promise((resolve) => {
      this.child.once('error', (error) => {
        this.emit('error', new Error(`cannot start ${spec.python}: ${error.message}`));
        this.onExit(-1, resolve);
      });
      this.child.once('exit', (code, signal) => {
        // What the process wrote before it exited (its load-failed, say) is read first: its death is
        // reported once its socket ended, or after SOCKET_DRAIN_MS (a forked child of the model's may hold it open).
        void this.socketEnded().then(() => {
          if (code !== 0) this.emit('error', new Error(exitReason(code, signal)));
          this.onExit(code ?? -1, resolve);
        });
      });
    });
  }

  private socketEnded(): Promise<void> {
    if (this.socket.readableEnded || this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, SOCKET_DRAIN_MS);
      this.socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Sends one frame; `data` holds the tensors its slices point into. */
  postMessage(message: ToStub, data?: Uint8Array): void {
    if (this.exitCode !== undefined || this.socket.destroyed) return;
    const parts = encodeFrame(message, data);
    if (parts.length === 1) this.socket.write(parts[0]!);
    else {
      this.socket.cork();
      for (const part of parts) this.socket.write(part);
      this.socket.uncork();
    }
  }

  /** Kills the process (SIGKILL: a stuck execute or a close past its grace); resolves with its exit code. */
  terminate(): Promise<number> {
    if (this.exitCode === undefined) this.child.kill('SIGKILL');
    return this.exited;
  }

  private onExit(code: number, resolve: (code: number) => void): void {
    if (this.exitCode !== undefined) return;
    this.exitCode = code;
    this.regions.close();
    this.socket.destroy();
    resolve(code);
    this.emit('exit', code);
  }
}

/** How a process ended, in words: its exit code, or its signal (SIGKILL is how the kernel's OOM killer ends one). */
export function exitReason(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal === 'SIGKILL') return 'killed by SIGKILL (the out-of-memory killer, or a stop)';
  if (signal) return `killed by ${signal}`;
  return `exited with code ${code}`;
}
