/** The `batchwise` CLI (main.ts runs it, as a child of itself when it is PID 1). */
import { buildProgram } from './build-program.ts';

buildProgram()
  .parseAsync(process.argv)
  .catch((error: Error) => {
    process.stderr.write(`${JSON.stringify({ level: 'fatal', msg: error.message })}\n`);
    process.exit(1);
  });
