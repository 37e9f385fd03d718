import type { Logger } from 'pino';

/**
 * Ends the process at once, while model instances may be inside ONNX Runtime. process.exit()
 * stops the worker threads, and a run that returns into a stopping thread throws a C++
 * Napi::Error that aborts the process ("terminate called after throwing", exit 134). Instead
 * the process ends by its own SIGTERM with the default action (exit status 143, as any task
 * the orchestrator terminates), once the log lines written so far are flushed.
 *
 * A PID namespace's init never receives a signal it sends itself with the default action, so
 * this does not work in a process that is PID 1: main.ts never lets the CLI be PID 1 (it relays
 * from PID 1 to a child, see init-relay.ts), and the ECS task runs with an init process.
 */
export function forceExit(logger: Logger): void {
  const kill = () => {
    process.removeAllListeners('SIGTERM');
    process.kill(process.pid, 'SIGTERM');
  };
  // A log destination that never answers must not keep the process alive.
  setTimeout(kill, 1000).unref();
  logger.flush(() => kill());
}
