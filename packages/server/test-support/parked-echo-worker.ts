/**
 * A worker thread for parked-channel.test.ts: answers each batch with its bytes reversed and its
 * text upper-cased, through the channel when the batch came through it, else by postMessage; then
 * parks, as a JavaScript model's worker does. A batch whose text is "fail" fails; "big" answers
 * with more bytes than a slot holds (so the answer is posted). A posted {type: 'spins'} is answered
 * with how often the worker caught a batch by spinning, how often its spin ran out, and how many heads-ups woke it.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { ParkedChannelWorker, PARKED_SLOT_BYTES, type ParkedExecute } from '../src/backends/js/parked-channel.ts';

const port = parentPort!;
// argv[2], argv[3] and argv[4], when given: how long the worker spins for its next batch, ms; the most gap spun for,
// in its wake-ups; and the spin after a heads-up, in its wake-ups.
const argument = (index: number): number | undefined => (process.argv[index] === undefined ? undefined : Number(process.argv[index]));
const channel = new ParkedChannelWorker(workerData as SharedArrayBuffer, argument(2), argument(3), argument(4));
let timerTicks = 0;
setInterval(() => timerTicks++, 1);

type Message = ParkedExecute | { type: 'ticks' } | { type: 'spins' } | { type: 'note'; text: string };

function answer(batch: ParkedExecute, parked: boolean): void {
  if (batch.requests === 'fail') {
    const failed = { type: 'execute-failed' as const, id: batch.id, message: 'it failed' };
    if (parked) channel.tryAnswer(failed);
    else port.postMessage(failed);
    return;
  }
  const bytes = batch.requests === 'big' ? new Uint8Array(PARKED_SLOT_BYTES + 1).fill(7) : new Uint8Array(batch.buffer).reverse();
  const executed = {
    type: 'executed' as const,
    id: batch.id,
    buffer: bytes.buffer,
    responses: batch.requests.toUpperCase(),
    timings: { computeInputNs: 1, computeInferNs: 2, computeOutputNs: parked ? 1 : 0 },
  };
  if (parked && channel.tryAnswer(executed)) return;
  port.postMessage(executed, [executed.buffer]);
  if (parked) channel.posted();
}

function onMessage(message: Message): void {
  if ('type' in message) {
    if (message.type === 'ticks') port.postMessage({ ticks: timerTicks });
    else if (message.type === 'spins') port.postMessage({ spins: channel.spins });
    else port.postMessage({ noted: message.text });
    return;
  }
  answer(message, false);
  park();
}

function park(): void {
  for (;;) {
    const batch = channel.park(() => {
      const posted = receiveMessageOnPort(port);
      if (posted) onMessage(posted.message as Message);
      return posted !== undefined;
    });
    if (!batch) return;
    answer(batch, true);
  }
}

port.on('message', onMessage);
port.postMessage('ready');
