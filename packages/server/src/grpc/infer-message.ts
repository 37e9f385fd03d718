import { Errors, isInferenceServerError, type ElementCensus } from '../core/index.ts';
import { isDataType } from '../tensor/datatype.ts';
import { readModelInferRequest } from './infer-request-reader.ts';
import { contentsElementCount, decodedContentsBytes } from './tensor-contents.ts';
import { CONTENTS_FIELD_NUMBER } from './wire-contents.ts';
import type { ModelInferRequestWire } from './wire-types.ts';

/** A received ModelInferRequest: its fields, its inputs' contents on the wire, and what decoding them will create. */
export interface InferMessage {
  readonly request: ModelInferRequestWire;
  readonly census: ElementCensus;
}

/**
 * Decodes a ModelInferRequest message except its inputs' typed contents, which are counted on
 * the wire and attached as WireContents (decoded later by decodeInferRequest, once the counts
 * have been admitted). A message protobuf cannot read is INVALID_ARG.
 */
export function decodeInferMessage(message: Uint8Array): InferMessage {
  let request: ModelInferRequestWire;
  let contents;
  try {
    ({ request, contents } = readModelInferRequest(message));
  } catch (error) {
    if (isInferenceServerError(error)) throw error;
    throw Errors.invalidArg(`malformed ModelInferRequest: ${(error as Error).message}`);
  }
  let elements = 0;
  let stringElements = 0;
  let stringBytes = 0;
  let decodeBytes = 0;
  const inputs: { name: string; elements: number }[] = [];
  request.inputs.forEach((input, i) => {
    const found = contents[i];
    if (!found) return;
    input.contents = found;
    const n = contentsElementCount(found);
    elements += n;
    stringElements += found.counts[CONTENTS_FIELD_NUMBER.bytes_contents]!;
    stringBytes += found.bytesContentBytes;
    if (isDataType(input.datatype)) decodeBytes += decodedContentsBytes(input.datatype, found);
    inputs.push({ name: input.name, elements: n });
  });
  return { request, census: { elements, stringElements, stringBytes, inputs, decodeBytes } };
}
