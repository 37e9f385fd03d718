import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The export condition under which workspace packages resolve to their compiled `dist` (the image's ENTRYPOINT sets it). */
export const DIST_CONDITION = 'batchwise-dist';

/**
 * Node does not strip types under node_modules, so the compiled CLI started without
 * `--conditions=batchwise-dist` would die on the first workspace import naming a `.ts` file
 * (ERR_UNKNOWN_FILE_EXTENSION). Returns the one line that says how to start it then, or
 * undefined when it can start: from sources (tsx) or with the condition.
 */
export function missingConditionMessage(mainUrl: string, resolveSpecifier: (specifier: string) => string): string | undefined {
  if (!mainUrl.endsWith('.js')) return undefined;
  if (resolveSpecifier('@batchwise/protocol').endsWith('.js')) return undefined;
  const script = relative(process.cwd(), fileURLToPath(mainUrl)) || fileURLToPath(mainUrl);
  return `the compiled batchwise CLI needs Node's ${DIST_CONDITION} condition: node --conditions=${DIST_CONDITION} ${script} ${process.argv.slice(2).join(' ')}`.trimEnd();
}
