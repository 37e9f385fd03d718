import type { Logger } from 'pino';

/**
 * Ends the process at once, while model instances may be inside ONNX Runtime. process.exit()
 * stops the worker threads, and a run that returns into a stopping thread throws a C++
 * Napi::Error that aborts the process ("terminate called after throwing", exit 134). Instead
 * the process ends by its own SIGTERM with the default action (exit status 143, as any task
 * the orchestrator terminates), once the log lines written so far are flushed.
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
