import { describe, expect, it } from 'vitest';
import { populationOf, RecentWindow } from './recent-window.ts';

describe('RecentWindow', () => {
  it('holds the last values noted, with the newest and the oldest it still holds', () => {
    const window = new RecentWindow<number>(3);
    expect([window.newest, window.oldest, window.length, window.full]).toEqual([undefined, undefined, 0, false]);
    window.note(1);
    window.note(2);
    expect([window.newest, window.oldest, window.full]).toEqual([2, 1, false]);
    window.note(3);
    window.note(4);
    expect([window.newest, window.oldest, window.length, window.full]).toEqual([4, 2, 3, true]);
    expect([...window.all].sort()).toEqual([2, 3, 4]);
  });

  it('gives the population once a window of 32 arrivals is full: the most held at once among them', () => {
    const held = new RecentWindow<number>(32);
    for (let i = 0; i < 31; i++) held.note(i % 8);
    expect(populationOf(held)).toBeUndefined();
    held.note(15);
    expect(populationOf(held)).toBe(15);
    // A pool that shrinks is forgotten once a whole window of arrivals saw no more than 8.
    for (let i = 0; i < 31; i++) held.note(8);
    expect(populationOf(held)).toBe(15);
    held.note(8);
    expect(populationOf(held)).toBe(8);
  });
});
