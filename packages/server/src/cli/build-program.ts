/** The `batchwise` program: built here, parsed by program.ts, walked by its tests without running anything. */
import { Command } from 'commander';
import { SERVER_VERSION } from '../core/version.ts';
import { commandGroup } from './command-group.ts';
import { doctorCommand } from './doctor.ts';
import { modelsCommand } from './models/index.ts';
import { serveCommand } from './serve.ts';
import { tuneCommand } from './tune/index.ts';

export function buildProgram(): Command {
  return commandGroup(new Command('batchwise'))
    .description('Batchwise: a Triton-compatible batching inference server on ONNX Runtime')
    .version(SERVER_VERSION)
    .addCommand(serveCommand())
    .addCommand(doctorCommand())
    .addCommand(modelsCommand())
    .addCommand(tuneCommand());
}
