/** The `batchwise` CLI (main.ts runs it, as a child of itself when it is PID 1). */
import { Command } from 'commander';
import { SERVER_VERSION } from '../core/inference-service.ts';
import { doctorCommand } from './doctor.ts';
import { modelsCommand } from './models/index.ts';
import { serveCommand } from './serve.ts';
import { tuneCommand } from './tune/index.ts';

const program = new Command('batchwise')
  .description('Batchwise: a Triton-compatible batching inference server on ONNX Runtime')
  .version(SERVER_VERSION)
  // The program's own options (--version, --help) only before a command: after it, `models canary --version 2` is the canary's.
  .enablePositionalOptions()
  .addCommand(serveCommand())
  .addCommand(doctorCommand())
  .addCommand(modelsCommand())
  .addCommand(tuneCommand());

program.parseAsync(process.argv).catch((error: Error) => {
  process.stderr.write(`${JSON.stringify({ level: 'fatal', msg: error.message })}\n`);
  process.exit(1);
});
