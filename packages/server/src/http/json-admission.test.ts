import { describe, expect, it, vi } from 'vitest';
import type { ElementCensus, InferenceService, MemoryReservation } from '../core/index.ts';
import { JSON_VALUE_BYTES } from '../core/index.ts';
import { admitJsonBody } from './json-admission.ts';

describe('admitJsonBody', () => {
  it("hands core the body's values, strings apart, and charges what the parse will create", () => {
    const admitElements = vi.fn();
    const service = { admitElements } as unknown as InferenceService;
    const memory = {} as MemoryReservation;
    const json = Buffer.from('{"inputs":[{"name":"T","datatype":"BYTES","shape":[2],"data":[["ab"],["c"]]}]}');
    admitJsonBody(service, memory, { modelName: 'm' }, json);
    const census = admitElements.mock.calls[0]![2] as ElementCensus;
    expect(admitElements.mock.calls[0]!.slice(0, 2)).toEqual([memory, { modelName: 'm' }]);
    // Values in arrays: the shape's 2, the strings "ab" and "c"; containers: the input object and two rows.
    expect(census).toEqual({
      elements: 3,
      stringElements: 2,
      stringBytes: 3,
      inputs: [],
      decodeBytes: json.byteLength + (3 + 3) * JSON_VALUE_BYTES + 3 * 2,
    });
  });
});
