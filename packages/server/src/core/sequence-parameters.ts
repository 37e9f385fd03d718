import { sequenceControlsOf, type ModelConfig, type SequenceControls } from '../config/index.ts';
import { Errors } from '../errors/errors.ts';
import type { InferenceRequest, RequestSequence } from '../protocol/types.ts';

/** Triton's bound on a string correlation id (tritonserver.cc). */
const MAX_STRING_ID_LENGTH = 128;

const NO_SEQUENCE: RequestSequence = { id: 0n, start: false, end: false };

/**
 * A request's sequence, from the parameters `sequence_id` (uint64 or string), `sequence_start` and
 * `sequence_end` (Triton's sequence extension), in the words of Triton's HTTP frontend when one
 * cannot be read. The frontends have read `sequence_id` exactly already where a number past 2^53 can
 * come (`request.sequenceId`); calls from inside the server (ensembles, JavaScript models) come here
 * with their parameters only. No parameter: not part of a sequence (id 0).
 */
export function requestSequenceOf(request: InferenceRequest): RequestSequence {
  const { parameters } = request;
  const given = request.sequenceId ?? parameters['sequence_id'];
  const start = parameters['sequence_start'];
  const end = parameters['sequence_end'];
  if (given === undefined && start === undefined && end === undefined) return NO_SEQUENCE;
  let id: bigint | string;
  if (given === undefined) id = 0n;
  else if (typeof given === 'string' || (typeof given === 'bigint' && given >= 0n && given < 2n ** 64n)) id = given;
  else if (typeof given === 'number' && Number.isSafeInteger(given) && given >= 0) id = BigInt(given);
  else throw Errors.invalidArg("Unable to parse 'sequence_id'");
  if (typeof id === 'string' && id.length > MAX_STRING_ID_LENGTH) {
    throw Errors.invalidArg(`string correlation ID cannot be longer than ${MAX_STRING_ID_LENGTH} characters`);
  }
  for (const [key, value] of [
    ['sequence_start', start],
    ['sequence_end', end],
  ] as const) {
    if (value !== undefined && typeof value !== 'boolean') throw Errors.invalidArg(`Unable to parse '${key}'`);
  }
  return { id, start: start === true, end: end === true };
}

const controlsByConfig = new WeakMap<ModelConfig, SequenceControls>();

/**
 * Triton's InferenceRequest::ValidateCorrelationId: a model whose CORRID control is numeric takes
 * numeric ids (0 included, which the batcher then refuses), one whose CORRID is TYPE_STRING string ids.
 */
export function checkCorrelationId(sequence: RequestSequence, config: ModelConfig, requestId: string | undefined): void {
  let controls = controlsByConfig.get(config);
  if (!controls) controlsByConfig.set(config, (controls = sequenceControlsOf(config)));
  const corrid = controls.corrid;
  if (!corrid) return;
  const given = typeof sequence.id === 'string' ? 'BYTES' : 'UINT64';
  if ((given === 'BYTES') === (corrid.datatype === 'BYTES')) return;
  throw Errors.invalidArg(
    `[request id: ${requestId || '<id_unknown>'}] sequence batching control '${corrid.name}' data-type is '${given}', ` +
      `but model '${config.name}' expects '${corrid.datatype}'`,
  );
}
