// Development-only entry: runs a TypeScript worker from source through tsx. Compiled
// builds start the .js worker directly (see onnxruntime-backend.ts, js-backend.ts).
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.tsEntry);
