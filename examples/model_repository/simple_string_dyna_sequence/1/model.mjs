// Triton's QA `simple_string_dyna_sequence` in JavaScript: a running sum per sequence, keyed by its string
// CORRID (a decimal number, as Triton's clients send it), the id added to the sum at END.
import { tensor } from '@batchwise/backend';

export default class {
  initialize() {
    this.sums = new Map();
  }

  execute(requests) {
    return requests.map((r) => {
      const id = r.inputs.CORRID.data[0].toString();
      const sum = (r.inputs.START.data[0] === 1 ? 0 : this.sums.get(id)) + r.inputs.INPUT.data[0];
      if (r.parameters.sequence_end) this.sums.delete(id);
      else this.sums.set(id, sum);
      return { outputs: [tensor('OUTPUT', 'INT32', [1, 1], [r.inputs.END.data[0] === 1 ? sum + Number(id) : sum])] };
    });
  }
}
