/**
 * token_generator: the decoupled step of the text_generation ensemble (model_transaction_policy
 * { decoupled: true }), which answers each request with one response per token. It decodes greedily:
 * it asks the next-token model (the `next_token_model` parameter, an ONNX model of this repository)
 * for the logits of the next token after the last `context_length` ones, sends the highest (the lowest
 * id on ties) as `output_ids`, and goes on until `max_tokens`. execute() starts every request of its
 * batch and returns; the requests then stream on their own, and their calls to the next-token model,
 * made at the same time, batch together in that model's queue. A cancelled request (its client went
 * away) stops at once: its signal aborts the call it waits for, and its next send is refused.
 */
import { inferModel, ModelError, tensor } from '@batchwise/backend';

export default class TokenGenerator {
  initialize(args) {
    this.nextTokenModel = args.config.parameters.next_token_model.string_value;
    this.contextLength = Number(args.config.parameters.context_length.string_value);
  }

  execute(requests) {
    for (const request of requests) {
      this.generate(request).catch((error) => {
        // A send refused because the request was cancelled or ended needs no answer; anything else is its error.
        if (!request.responseSender.closed) void request.responseSender.send(error, { final: true }).catch(() => {});
      });
    }
  }

  async generate(request) {
    const sender = request.responseSender;
    const ids = request.inputs.input_ids.data;
    const maxTokens = request.inputs.max_tokens.data[0];
    if (!(maxTokens >= 0)) throw new ModelError(`max_tokens must be 0 or more, got ${maxTokens}`, 'INVALID_ARG');
    if (ids.length < this.contextLength) throw new ModelError(`input_ids must hold at least ${this.contextLength} ids`, 'INVALID_ARG');
    const context = Array.from(ids.slice(-this.contextLength));
    for (let i = 0; i < maxTokens; i++) {
      const { output } = await inferModel({
        model: this.nextTokenModel,
        inputs: [tensor('context', 'INT64', [1, this.contextLength], context)],
        signal: request.signal,
      });
      const next = BigInt(argmax(output('logits').data));
      context.shift();
      context.push(next);
      await sender.send({ outputs: [tensor('output_ids', 'INT64', [1, 1], [next])] }, { final: i === maxTokens - 1 });
    }
    if (maxTokens === 0) await sender.send(undefined, { final: true });
  }
}

/** The greedy choice: the highest logit, the lowest id on ties. */
function argmax(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}
