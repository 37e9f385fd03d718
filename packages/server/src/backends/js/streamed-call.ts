import type { InferenceRequest, InferenceStreamCall } from '../../protocol/types.ts';
import { MAX_UNSENT_RESPONSES, packTensors, type ToWorker } from './protocol.ts';

/**
 * A call from model code that reads every response of the called model (inferModelStream, Triton's
 * BLS `exec(decoupled=True)`), served on the main thread: each response goes to the worker as it
 * comes, at most MAX_UNSENT_RESPONSES ahead of what model code took (it acknowledges them), so a
 * model that reads slowly holds the called model back. The first error response ends the call with
 * it (the caller aborts `cancel` then, and the called request is cancelled). Resolves once the last
 * response or the final flag was posted; throws what refused or failed the call.
 */
export class StreamedCall {
  private unacknowledged = 0;
  private wake: (() => void) | undefined;

  constructor(
    private readonly callId: number,
    private readonly post: (message: ToWorker, transfer?: ArrayBuffer[]) => void,
  ) {}

  async serve(streamModel: InferenceStreamCall, request: InferenceRequest, cancel: AbortController): Promise<void> {
    const { signal } = cancel;
    for await (const event of streamModel(request, { signal })) {
      if (event.kind === 'error') {
        cancel.abort(event.error);
        throw event.error;
      }
      if (event.kind === 'final') {
        this.post({ type: 'call-end', callId: this.callId });
        return;
      }
      const { response } = event;
      const { buffer, slices } = packTensors([response.outputs]);
      this.post(
        {
          type: 'call-response',
          callId: this.callId,
          model: response.modelName,
          version: response.modelVersion,
          buffer,
          outputs: slices[0]!,
          ...(response.parameters && { parameters: response.parameters }),
          final: event.final,
        },
        [buffer],
      );
      if (event.final) return;
      if (++this.unacknowledged >= MAX_UNSENT_RESPONSES && !signal.aborted) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
      }
    }
  }

  /** Model code took `count` more responses. */
  acknowledge(count: number): void {
    this.unacknowledged -= count;
    if (this.unacknowledged < MAX_UNSENT_RESPONSES) {
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    }
  }
}
