#!/usr/bin/env node
import { relayAsInit } from './init-relay.ts';

// Decided before the server's modules load: as PID 1 this process only starts the CLI as its
// child and relays signals and the exit status (see init-relay.ts).
if (!relayAsInit()) await import('./program.ts');
