import { Worker } from 'node:worker_threads';

const RUNNING_FROM_SOURCE = import.meta.url.endsWith('.ts');

/**
 * Starts a backend's worker thread: `worker.js` beside `backendDir` in a compiled build, or
 * `worker.ts` through tsx (tsx-worker.mjs) when the server runs from source. `heapLimitBytes`
 * bounds its old-generation heap, so code that outgrows it kills its own worker
 * (ERR_WORKER_OUT_OF_MEMORY) instead of the process.
 */
export function spawnWorkerThread(backendDir: URL, workerData: object, heapLimitBytes: number | undefined): Worker {
  const resourceLimits =
    heapLimitBytes !== undefined ? { maxOldGenerationSizeMb: Math.max(16, Math.floor(heapLimitBytes / 2 ** 20)) } : undefined;
  if (RUNNING_FROM_SOURCE) {
    return new Worker(new URL('./tsx-worker.mjs', import.meta.url), {
      workerData: { ...workerData, tsEntry: new URL('./worker.ts', backendDir).href },
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
