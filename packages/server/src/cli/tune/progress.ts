/** Where `tune` shows how far it is: a bar redrawn in place on a terminal, plain lines elsewhere (CI logs). */
export interface Progress {
  /** `fraction` of the budget spent, 0..1. */
  update(fraction: number, label: string): void;
  /** A line that stays (a finished measurement). */
  line(text: string): void;
  done(): void;
}

const WIDTH = 24;

export function createProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY || process.env['CI']) {
    let lastPct = -1;
    return {
      update(fraction, label) {
        const pct = Math.floor(Math.min(1, fraction) * 100);
        if (pct !== lastPct) stream.write(`[tune ${String(pct).padStart(3)}%] ${label}\n`);
        lastPct = pct;
      },
      line: (text) => void stream.write(`${text}\n`),
      done: () => undefined,
    };
  }
  let bar = '';
  const draw = () => stream.write(`\r\x1b[2K${bar}`);
  return {
    update(fraction, label) {
      const filled = Math.round(Math.min(1, fraction) * WIDTH);
      bar =
        `[${'#'.repeat(filled)}${'-'.repeat(WIDTH - filled)}] ${String(Math.floor(Math.min(1, fraction) * 100)).padStart(3)}% ${label}`.slice(
          0,
          (stream.columns ?? 100) - 1,
        );
      draw();
    },
    line(text) {
      stream.write(`\r\x1b[2K${text}\n`);
      draw();
    },
    done: () => void stream.write('\r\x1b[2K'),
  };
}
