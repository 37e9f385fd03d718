import { Worker } from 'node:worker_threads';
import { execArgvWithoutTsx, sourceWorkerUrl } from './source-worker-bundle.ts';

const RUNNING_FROM_SOURCE = import.meta.url.endsWith('.ts');

/**
 * Starts a backend's worker thread: `worker.js` beside `backendDir` in a compiled build, or, when
 * the server runs from source, the bundle of `worker.ts` built once per process, without tsx's
 * loader (source-worker-bundle.ts). `heapLimitBytes` bounds its old-generation heap, so code that outgrows
 * it kills its own worker (ERR_WORKER_OUT_OF_MEMORY) instead of the process.
 */
export function spawnWorkerThread(backendDir: URL, workerData: object, heapLimitBytes: number | undefined): Worker {
  const resourceLimits =
    heapLimitBytes !== undefined ? { maxOldGenerationSizeMb: Math.max(16, Math.floor(heapLimitBytes / 2 ** 20)) } : undefined;
  if (RUNNING_FROM_SOURCE) {
    const execArgv = execArgvWithoutTsx();
    return new Worker(sourceWorkerUrl(new URL('./worker.ts', backendDir)), {
      workerData,
      ...(execArgv && { execArgv }),
      ...(resourceLimits && { resourceLimits }),
    });
  }
  return new Worker(new URL('./worker.js', backendDir), { workerData, ...(resourceLimits && { resourceLimits }) });
}

/**
 * How often a model instance's worker thread may die before the instance gives up: more than
 * `maxCrashes` deaths within `windowMs` leave it failed with the reason, instead of restarting
 * a model that crashes on every batch forever. Shared by the backends whose instances are workers.
 */
export class CrashWindow {
  private crashes: number[] = [];

  constructor(
    readonly maxCrashes = 3,
    readonly windowMs = 60_000,
  ) {}

  /** Notes a death; true when the instance should give up (too many in the window). */
  record(now = Date.now()): boolean {
    this.crashes = [...this.crashes.filter((t) => now - t < this.windowMs), now];
    return this.crashes.length > this.maxCrashes;
  }

  /** Deaths within the window, the last one included. */
  get count(): number {
    return this.crashes.length;
  }

  describe(how: string): string {
    return `crashed ${this.count} times in ${this.windowMs / 1000} s (last: ${how}); not restarted`;
  }
}

/**
 * Resolves once the worker's first message says `{ type: 'loaded', ...L }`; rejects with the
 * message of a `{ type: 'load-failed', message }`, or if the worker dies first.
 */
export function waitUntilLoaded<L>(worker: Worker): Promise<Worker & { loaded: L }> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onExit = (code: number) => {
      cleanup();
      reject(new Error(`model instance exited during load (code ${code})`));
    };
    const onMessage = (message: { readonly type: string }) => {
      if (message.type === 'load-failed') {
        cleanup();
        void worker.terminate();
        reject(new Error((message as unknown as { message: string }).message));
      } else if (message.type === 'loaded') {
        cleanup();
        resolve(Object.assign(worker, { loaded: message as unknown as L }));
      }
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}

/**
 * What supervision needs of a model instance's runner: a worker thread, or a Python model's stub
 * process (backends/python/stub-process.ts), which mimics this much of a Worker.
 */
export interface WorkerLike {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a Worker's and a stub's messages differ; supervision posts only the close message.
  postMessage(message: any): void;
  terminate(): Promise<number>;
  /** 'message' (a message), 'error' (an Error: how it died), 'exit' (an exit code). */
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
}

/** Restarts after a death wait this long, doubling with each death in the crash window, up to `maxMs`. */
export interface RestartBackoff {
  readonly firstMs: number;
  readonly maxMs: number;
}

export interface SupervisedWorkerOptions<M, W extends WorkerLike = Worker> {
  /** Starts a fresh worker (it must answer `loaded` once its model is ready). */
  readonly spawn: () => W;
  /** Resolves once a fresh worker's model is ready; rejects with why it is not. @default waitUntilLoaded */
  readonly load?: (worker: W) => Promise<W>;
  /** What asks the worker to finalize and end. @default { type: 'close' } */
  readonly closeMessage?: unknown;
  /** Waits before each restart. @default - restarts at once */
  readonly backoff?: RestartBackoff;
  /** What the errors call the instance, e.g. "model instance of 'm'". */
  readonly instance: string;
  /** Every message of the current worker, and of the ones replacing it. */
  readonly onMessage: (worker: W, message: M) => void;
  /** The worker died (or was stopped): fail everything it was running. */
  readonly onDeath: (how: string, worker: W) => void;
  /** The error type of the instance's own failures (given up, closed). @default Error */
  readonly error?: (message: string) => Error;
  /** How long `close` lets the worker finish (finalize) before terminating it, ms. */
  readonly closeGraceMs: number;
}

/**
 * The worker thread behind one model instance, kept alive: a worker that dies (a crash, its
 * heap limit, a stop after a timeout) is reported through `onDeath` and replaced by a fresh
 * one, which requests wait for; more deaths than the crash window allows leave the instance
 * failed with the reason (`onFatal`). Shared by the backends whose instances are workers.
 */
export class SupervisedWorker<M, W extends WorkerLike = Worker> {
  private current: W;
  private readonly crashes = new CrashWindow();
  /** Workers whose death was handled ('error' and 'exit' both report one death). */
  private readonly dead = new WeakSet<W>();
  private replacement: Promise<void> | undefined;
  private fatalError: Error | undefined;
  private closing = false;
  /** Set by the owner: called once if the instance gives up after repeated deaths. */
  onFatal: ((error: Error) => void) | undefined;

  constructor(
    first: W,
    private readonly options: SupervisedWorkerOptions<M, W>,
  ) {
    this.current = first;
    this.attach(first);
  }

  /** The worker to post to, once any replacement has loaded; throws when the instance gave up or is closed. */
  async ready(): Promise<W> {
    if (this.replacement) await this.replacement;
    if (this.fatalError) throw this.fatalError;
    // A closed instance's worker has exited: a message posted to it would never be answered.
    if (this.closing) throw this.error(`${this.options.instance} is closed (its version was unloaded)`);
    return this.current;
  }

  /** Whether `worker` is the one serving now (not one that died or was replaced). */
  isCurrent(worker: W): boolean {
    return worker === this.current && !this.dead.has(worker);
  }

  /** Asks the worker to end (`{ type: 'close' }`), terminating it after the grace; resolves once it has exited. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.fatalError) return;
    if (this.replacement) await this.replacement.catch(() => undefined);
    const worker = this.current;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage(this.options.closeMessage ?? { type: 'close' });
    const timer = setTimeout(() => void worker.terminate(), this.options.closeGraceMs);
    await exited;
    clearTimeout(timer);
  }

  /** Test hook: kills the worker thread as a native crash would. */
  crashForTesting(): Promise<number> {
    return this.current.terminate();
  }

  /** The worker died or was stopped (`how` says which): fail its work, then replace it or give up. */
  died(worker: W, how: string): void {
    if (worker !== this.current || this.closing || this.dead.has(worker)) return;
    this.dead.add(worker);
    this.options.onDeath(how, worker);
    const backoff = this.options.backoff;
    if (this.crashes.record() && !backoff) {
      this.giveUp(`${this.options.instance} ${this.crashes.describe(how)}`);
      return;
    }
    const load = this.options.load ?? ((fresh: W) => waitUntilLoaded<object>(fresh as unknown as Worker) as unknown as Promise<W>);
    const delayMs = backoff ? Math.min(backoff.maxMs, backoff.firstMs * 2 ** (this.crashes.count - 1)) : 0;
    const spawned = delayMs > 0 ? sleep(delayMs).then(() => load(this.options.spawn())) : load(this.options.spawn());
    this.replacement = spawned.then(
      (fresh) => {
        this.current = fresh;
        this.attach(fresh);
        this.replacement = undefined;
      },
      (reloadError: Error) => {
        this.replacement = undefined;
        this.giveUp(`${this.options.instance} could not be restarted: ${reloadError.message}`);
      },
    );
  }

  private giveUp(message: string): void {
    this.fatalError = this.error(message);
    this.onFatal?.(this.fatalError);
  }

  private error(message: string): Error {
    return this.options.error ? this.options.error(message) : new Error(message);
  }

  /** Deaths within the crash window, the last one included. */
  get recentDeaths(): number {
    return this.crashes.count;
  }

  private attach(worker: W): void {
    worker.on('message', (message: M) => this.options.onMessage(worker, message));
    worker.on('error', (error) => this.died(worker, error.message));
    worker.on('exit', (code) => this.died(worker, `exited with code ${code}`));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
