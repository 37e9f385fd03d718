/**
 * The names of the server's settings that a deployment passes outside its flags: the environment
 * variables `batchwise serve` reads and the header that carries the model-repository key. The
 * serve declaration (serve-flags.ts, SERVE_ENVIRONMENT) and the option resolution use them, and
 * infra's ECS task and load balancer import them (infra/lib/server-metrics.ts, beside the EMF
 * contract), so a rename reaches the stack or fails its type-check. A module without imports,
 * which synth loads directly.
 */

/** `1` turns --cloudwatch-metrics on when the flag is not given. */
export const CLOUDWATCH_METRICS_ENV = 'BATCHWISE_CLOUDWATCH_METRICS';

/** The model-repository API key (a secret in a deployment); restricts that API group to requests carrying it. */
export const MODEL_REPOSITORY_KEY_ENV = 'BATCHWISE_MODEL_REPOSITORY_KEY';

/** The request header that must carry that key (Triton's `--http-restricted-api` key). */
export const MODEL_REPOSITORY_KEY_HEADER = 'batchwise-key';
