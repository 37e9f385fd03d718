/**
 * text_generation_single: text_generation (the ensemble of text_tokenizer, token_generator and
 * text_detokenizer) in one decoupled model (model_transaction_policy { decoupled: true }) that streams
 * one character per response. For each request it decodes greedily: it asks the next-token model (the
 * `next_token_model` parameter, an ONNX model of this repository) for the logits of the next character
 * after the last two, sends the highest (the lowest id on ties), and goes on until `max_tokens`.
 * execute() starts every request of its batch and returns; the requests then stream on their own, and
 * their calls to the next-token model, made at the same time, batch together in that model's queue.
 * A cancelled request (its client went away) stops at once: its signal aborts the call it waits for.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inferModel, ModelError, tensor } from '@batchwise/backend';

export default class TextGenerationSingle {
  async initialize(args) {
    this.vocabulary = JSON.parse(await readFile(join(args.versionDir, 'vocabulary.json'), 'utf8'));
    this.space = this.vocabulary.indexOf(' ');
    this.nextTokenModel = args.config.parameters.next_token_model.string_value;
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
    const prompts = request.inputs.text_input.data;
    const maxTokens = request.inputs.max_tokens.data[0];
    if (prompts.length !== 1) throw new ModelError(`text_input must hold one prompt, got ${prompts.length}`, 'INVALID_ARG');
    if (!(maxTokens >= 0)) throw new ModelError(`max_tokens must be 0 or more, got ${maxTokens}`, 'INVALID_ARG');
    const context = [this.space, this.space, ...[...prompts[0].toString('utf8')].map((c) => this.idOf(c))].slice(-2);
    for (let i = 0; i < maxTokens; i++) {
      const { output } = await inferModel({
        model: this.nextTokenModel,
        inputs: [tensor('context', 'INT64', [1, 2], context.map(BigInt))],
        signal: request.signal,
      });
      const next = argmax(output('logits').data);
      context.shift();
      context.push(next);
      await sender.send({ outputs: [tensor('text_output', 'BYTES', [1, 1], [this.vocabulary[next]])] }, { final: i === maxTokens - 1 });
    }
    if (maxTokens === 0) await sender.send(undefined, { final: true });
  }

  /** A character's id; one the model does not know reads as a space. */
  idOf(c) {
    const id = this.vocabulary.indexOf(c.toLowerCase());
    return id >= 0 ? id : this.space;
  }
}

/** The greedy choice: the highest logit, the lowest id on ties. */
function argmax(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}
