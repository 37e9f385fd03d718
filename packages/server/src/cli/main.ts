#!/usr/bin/env node
import { missingConditionMessage } from './compiled-condition.ts';
import { relayAsInit } from './init-relay.ts';

const missingCondition = missingConditionMessage(import.meta.url, (specifier) => import.meta.resolve(specifier));
if (missingCondition) {
  process.stderr.write(`${missingCondition}\n`);
  process.exit(1);
}
// Decided before the server's modules load: as PID 1 this process only starts the CLI as its
// child and relays signals and the exit status (see init-relay.ts).
if (!relayAsInit()) await import('./program.ts');
