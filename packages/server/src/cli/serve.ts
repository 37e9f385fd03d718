import { isatty } from 'node:tty';
import { Command } from 'commander';
import { useHeadlessVulkanDrivers } from '../backends/headless-vulkan.ts';
import { pinoLevelFor } from '../logging/log-settings.ts';
import { attributeOf, serveOptionsFrom } from '../options/index.ts';
import { addServeFlags } from './declared-flags.ts';
import { addFlagsWithoutEffect, flagsWithoutEffectGiven } from './triton-flags.ts';
import { forceExit } from './force-exit.ts';
import { explainPortInUse } from './port-in-use.ts';
import { heapGrowingPercentGiven, keepOldGenerationRoom, OLD_GENERATION_ROOM_BYTES } from './old-generation-room.ts';

/**
 * A second signal within this long of the first is the same stop delivered twice, not a second one:
 * a stop sent to a process group (systemd, `kill -- -PGID`) reaches the server and a wrapper that
 * relays it (tsx under `pnpm start`) within milliseconds of each other. A person's second Ctrl-C takes longer.
 */
const SAME_STOP_MS = 100;

/** `batchwise serve`: its flags are declared in options/serve-flags.ts. */
export function serveCommand(): Command {
  const command = new Command('serve').description(
    'Serve the models of one or more model repositories over HTTP, gRPC and metrics endpoints',
  );
  return addFlagsWithoutEffect(addServeFlags(command)).action(async (flags: Record<string, unknown>) => {
    // The server's modules load when it is served, not for `--help` or another command.
    const { createServerLogger, startServer } = await import('../server.ts');
    const options = serveOptionsFrom(flags, process.env);
    const logger = createServerLogger(
      pinoLevelFor({
        log_verbose_level: options.logVerboseLevel,
        log_info: options.logInfo,
        log_warning: options.logWarning,
        log_error: options.logError,
      }),
    );
    let headless: ReturnType<typeof useHeadlessVulkanDrivers>;
    try {
      headless = useHeadlessVulkanDrivers();
    } catch (error) {
      logger.warn(
        { err: (error as Error).message },
        'Vulkan: could not write the headless NVIDIA driver manifest; WebGPU may find no adapter',
      );
    }
    if (headless) {
      logger.info(
        { replaces: headless.replaces, library: headless.library, VK_DRIVER_FILES: process.env['VK_DRIVER_FILES'] },
        'Vulkan: no display, so the NVIDIA driver is used through its EGL library, not the GLX one its manifest names',
      );
    }
    // Said at debug: a serve that fails before it listens writes nothing to stdout.
    if (!heapGrowingPercentGiven()) {
      keepOldGenerationRoom((percent, heapBytes) =>
        logger.debug(
          { heapGrowingPercent: percent, heapMB: Math.round(heapBytes / 2 ** 20), roomMB: OLD_GENERATION_ROOM_BYTES / 2 ** 20 },
          "V8: room kept above the live heap for the young generation (--heap-growing-percent; 0: V8's own)",
        ),
      );
    }
    for (const given of flagsWithoutEffectGiven(flags)) {
      logger.warn(given, `${given.flag} has no effect in Batchwise: ${given.reason}`);
    }
    // A port still held (the previous server in its shutdown grace, or another one) is said in one line.
    const starting = startServer({ ...options, logger }).catch(async (error: unknown) => {
      throw await explainPortInUse(error, options);
    });
    // The shutdown grace is for load balancers. A developer stopping the server in a terminal (stdin is
    // one) has none, and restarting at once would find the ports still held: no grace then, unless
    // --shutdown-grace-secs was given on the command line.
    const interactive = isatty(0) && flags[attributeOf('--shutdown-grace-secs')] === undefined;
    // Signals are handled from here on, not once start-up has finished: models serve as soon as
    // they load, while start-up may still be loading others, and a SIGTERM's default action
    // would drop what they hold.
    let stoppingSince: number | undefined;
    const stop = (signal: string) => {
      if (stoppingSince !== undefined) {
        if (performance.now() - stoppingSince < SAME_STOP_MS) {
          logger.debug({ signal }, 'the same stop again (a wrapper relayed it): still draining');
          return;
        }
        logger.warn({ signal }, 'second signal: exiting now');
        return forceExit(logger);
      }
      stoppingSince = performance.now();
      const graceMs = interactive ? 0 : options.shutdownGraceMs;
      logger.info(
        { signal, graceMs, ...(interactive && { interactive }) },
        interactive
          ? 'shutting down: stdin is a terminal, so without the shutdown grace (it is for load balancers); draining in-flight requests'
          : 'shutting down: not ready, draining in-flight requests',
      );
      const force = setTimeout(() => {
        logger.error('exit timeout reached with requests still in flight: forcing exit');
        forceExit(logger);
      }, options.exitTimeoutMs);
      force.unref();
      void starting
        .then((server) => server.close({ graceMs, exitTimeoutMs: options.exitTimeoutMs }))
        .then(
          () => {
            logger.info('drained; exiting');
            process.exit(0);
          },
          (error: Error) => {
            logger.error({ err: error.message }, 'error while shutting down');
            process.exit(1);
          },
        );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    await starting;
  });
}
