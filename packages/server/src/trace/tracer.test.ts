import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseTraceConfigFlags } from './trace-config-flags.ts';
import { parseTraceSettingsUpdate, traceSettingsToWire } from './trace-settings.ts';
import { markCompute, MAX_HELD_TRACES, Tracer } from './tracer.ts';

const quiet = pino({ level: 'silent' });

describe('trace settings', () => {
  it("parse Triton's --trace-config flags", () => {
    expect(
      parseTraceConfigFlags(['triton,file=/tmp/t.json', 'level=TIMESTAMPS', 'rate=10', 'count=-1', 'triton,log-frequency=5']).settings,
    ).toEqual({
      trace_file: '/tmp/t.json',
      trace_level: ['TIMESTAMPS'],
      trace_rate: 10,
      trace_count: -1,
      log_frequency: 5,
    });
    expect(() => parseTraceConfigFlags(['frequency=5'])).toThrow(/unknown key 'frequency'/);
    expect(() => parseTraceConfigFlags(['constructor=5'])).toThrow(/unknown key 'constructor'/);
    expect(() => parseTraceConfigFlags(['triton,toString=5'])).toThrow(/unknown key 'toString' for mode triton/);
    expect(() => parseTraceConfigFlags(['rate=0'])).toThrow(/trace_rate' must be an integer >= 1/);
  });

  it('parse updates as the wire sends them, and refuse what cannot be done', () => {
    expect(parseTraceSettingsUpdate({ trace_level: ['timestamps'], trace_rate: '1', trace_count: null })).toEqual({
      trace_level: ['TIMESTAMPS'],
      trace_rate: 1,
      trace_count: undefined,
    });
    expect(() => parseTraceSettingsUpdate({ trace_file: '/etc/passwd' })).toThrow(/trace_file cannot be changed through the API/);
    expect(() => parseTraceSettingsUpdate({ trace_level: ['TENSORS'] })).toThrow(expect.objectContaining({ code: 'UNSUPPORTED' }));
    // The mode is chosen at start-up: an update may repeat it, never change it.
    expect(() => new Tracer({}, quiet).update(parseTraceSettingsUpdate({ trace_mode: 'opentelemetry' }))).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED' }),
    );
    expect(new Tracer({}, quiet).update(parseTraceSettingsUpdate({ trace_mode: 'triton' })).trace_mode).toBe('triton');
    expect(() => parseTraceSettingsUpdate({ trace_mode: 'zipkin' })).toThrow(/trace_mode must be 'triton' or 'opentelemetry'/);
    expect(() => parseTraceSettingsUpdate({ trace_rate: 5 })).toThrow(/must be a string or a list of strings/);
    expect(() => parseTraceSettingsUpdate({ trace_rate: ['1', '2'] })).toThrow(/takes one value, got 2/);
    expect(() => parseTraceSettingsUpdate({ bogus: '1' })).toThrow(/unknown trace setting 'bogus'/);
  });
});

describe('Tracer', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'trace-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('is off by default and samples one request in trace_rate, at most trace_count', async () => {
    const tracer = new Tracer({ trace_file: join(dir, 't.json') }, quiet);
    expect(tracer.start('m', '1', undefined)).toBeUndefined();
    tracer.update({ trace_level: ['TIMESTAMPS'], trace_rate: 2, trace_count: 2 });
    const picked = Array.from({ length: 8 }, () => tracer.start('m', '1', undefined));
    expect(picked.map((t) => t !== undefined)).toEqual([true, false, true, false, false, false, false, false]);
    for (const t of picked) t?.end();
    await tracer.close();
    expect(JSON.parse(await readFile(join(dir, 't.json'), 'utf8'))).toHaveLength(2);
  });

  it("writes Triton's trace format, numbered files with a log frequency", async () => {
    const tracer = new Tracer({ trace_file: join(dir, 't.json'), trace_level: ['TIMESTAMPS'], trace_rate: 1, log_frequency: 2 }, quiet);
    for (let i = 0; i < 3; i++) {
      const trace = tracer.start('simple', '3', `r${i}`)!;
      trace.mark('REQUEST_START', 100n);
      markCompute(trace, 200n, { computeInputNs: 10, computeInferNs: 20, computeOutputNs: 5 });
      trace.end();
    }
    await tracer.close();
    const first = JSON.parse(await readFile(join(dir, 't.json.0'), 'utf8'));
    expect(first).toHaveLength(2);
    expect(first[0]).toEqual({
      id: 1,
      model_name: 'simple',
      model_version: 3,
      request_id: 'r0',
      timestamps: [
        { name: 'REQUEST_START', ns: 100 },
        { name: 'COMPUTE_START', ns: 200 },
        { name: 'COMPUTE_INPUT_END', ns: 210 },
        { name: 'COMPUTE_OUTPUT_START', ns: 230 },
        { name: 'COMPUTE_END', ns: 235 },
      ],
    });
    expect(JSON.parse(await readFile(join(dir, 't.json.1'), 'utf8'))).toHaveLength(1);
  });

  it('never holds more than MAX_HELD_TRACES in memory', async () => {
    const tracer = new Tracer({ trace_file: join(dir, 't.json'), trace_level: ['TIMESTAMPS'], trace_rate: 1 }, quiet);
    for (let i = 0; i < MAX_HELD_TRACES + 1; i++) tracer.start('m', '1', undefined)!.end();
    await tracer.close();
    expect(JSON.parse(await readFile(join(dir, 't.json.0'), 'utf8'))).toHaveLength(MAX_HELD_TRACES);
    expect(JSON.parse(await readFile(join(dir, 't.json'), 'utf8'))).toHaveLength(1);
  });

  it('gives a model its own settings over the global ones until they are cleared', () => {
    const tracer = new Tracer({}, quiet);
    tracer.update({ trace_rate: 10 });
    expect(tracer.update({ trace_rate: 3, trace_level: ['TIMESTAMPS'] }, 'a')).toMatchObject({
      trace_rate: 3,
      trace_level: ['TIMESTAMPS'],
    });
    expect(tracer.settings('b')).toMatchObject({ trace_rate: 10, trace_level: ['OFF'] });
    expect(tracer.update({ trace_rate: undefined }, 'a')).toMatchObject({ trace_rate: 10, trace_level: ['TIMESTAMPS'] });
    expect(traceSettingsToWire(tracer.settings())).toEqual({
      trace_file: '',
      trace_level: ['OFF'],
      trace_rate: '10',
      trace_count: '-1',
      log_frequency: '0',
      trace_mode: 'triton',
    });
  });
});
