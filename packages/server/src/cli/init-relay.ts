import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/**
 * Signals passed on to the CLI. SIGKILL and SIGSTOP cannot be caught; SIGCHLD and the job
 * control signals concern this process only.
 */
export const RELAYED_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;

/**
 * The exit status of a process as a shell or `docker inspect` reports it: its exit code, or
 * 128 + the signal's number when a signal ended it (SIGTERM: 143).
 */
export function exitStatusOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal === null ? undefined : constants.signals[signal];
  return number === undefined ? 1 : 128 + number;
}

/**
 * In a container without an init process (no `--init`, no ECS `initProcessEnabled`) the CLI is
 * PID 1, and the kernel delivers to a PID namespace's init only the signals it handles: a
 * signal it sends itself with the default action, SIGKILL included, is dropped. The server's
 * forced exit ends it by its own SIGTERM (process.exit() aborts with 'terminate called after
 * throwing Napi::Error' while a worker thread is inside ONNX Runtime, see force-exit.ts), so as
 * PID 1 the exit timeout never ended it.
 *
 * As PID 1 this process therefore becomes a minimal init: it runs the same command as its child
 * (PID 2, where signals behave as anywhere else), passes on the signals it receives, and exits
 * with the child's status (128 + signal when a signal ended it). It loads no server module and
 * starts no worker, so its own exit is plain. Returns false, doing nothing, when not PID 1.
 *
 * It does not reap orphaned grandchildren (Node cannot wait for processes it did not spawn);
 * the server's own children (nvidia-smi) are reaped by the server. The ECS task runs with
 * `initProcessEnabled`, so there the init is docker-init and this never happens.
 */
export function relayAsInit(pid: number = process.pid): boolean {
  if (pid !== 1) return false;
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  for (const signal of RELAYED_SIGNALS) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.once('error', (error) => {
    process.stderr.write(`${JSON.stringify({ level: 'fatal', msg: `as PID 1, could not start the CLI as a child: ${error.message}` })}\n`);
    process.exit(1);
  });
  child.once('exit', (code, signal) => process.exit(exitStatusOf(code, signal)));
  return true;
}
