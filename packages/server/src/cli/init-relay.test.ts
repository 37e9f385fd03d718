import { describe, expect, it } from 'vitest';
import { exitStatusOf, relayAsInit } from './init-relay.ts';

describe('init relay', () => {
  it('reports the exit status as a shell does: the code, or 128 + the signal', () => {
    expect(exitStatusOf(0, null)).toBe(0);
    expect(exitStatusOf(3, null)).toBe(3);
    expect(exitStatusOf(null, 'SIGTERM')).toBe(143);
    expect(exitStatusOf(null, 'SIGKILL')).toBe(137);
    expect(exitStatusOf(null, null)).toBe(1);
  });

  it('does nothing unless it is PID 1', () => {
    expect(relayAsInit(4242)).toBe(false);
  });
});
