export interface Series {
  readonly name: string;
  /** x: throughput (infer/s), y: latency (ms); `label` is written beside the point (e.g. c=16). */
  readonly points: readonly { readonly x: number; readonly y: number; readonly label?: string }[];
  /** Drawn dashed (e.g. the open-loop sweep beside the closed-loop one). */
  readonly dashed?: boolean;
}

/** Extras drawn over the series: a horizontal limit (e.g. a latency objective) and one marked point. */
export interface PlotMarks {
  readonly limit?: { readonly y: number; readonly label: string };
  readonly marker?: { readonly x: number; readonly y: number; readonly label: string };
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

/** A small latency-versus-throughput line chart as standalone SVG. */
export function latencyThroughputSvg(title: string, series: readonly Series[], yLabel = 'latency (ms)', marks: PlotMarks = {}): string {
  // The legend sits right of the plot, as wide as its longest name (about 7 px a character).
  const legendWidth = 60 + 7 * Math.max(0, ...series.map((s) => s.name.length));
  const m = { left: 70, right: Math.max(180, legendWidth), top: 40, bottom: 55 };
  const width = 540 + m.right;
  const height = 440;
  const all = series.flatMap((s) => s.points);
  const maxX = niceMax(Math.max(1, ...all.map((p) => p.x)));
  const maxY = niceMax(Math.max(1, ...all.map((p) => p.y), marks.limit ? marks.limit.y * 1.1 : 0));
  const px = (x: number) => m.left + (x / maxX) * (width - m.left - m.right);
  const py = (y: number) => height - m.bottom - (y / maxY) * (height - m.top - m.bottom);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2 - m.right / 2}" y="22" text-anchor="middle" font-size="15">${escape(title)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const x = (maxX / 5) * i;
    const y = (maxY / 5) * i;
    parts.push(`<line x1="${px(x)}" y1="${py(0)}" x2="${px(x)}" y2="${py(maxY)}" stroke="#eee"/>`);
    parts.push(`<line x1="${px(0)}" y1="${py(y)}" x2="${px(maxX)}" y2="${py(y)}" stroke="#eee"/>`);
    parts.push(`<text x="${px(x)}" y="${py(0) + 18}" text-anchor="middle">${tick(x, maxX / 5)}</text>`);
    parts.push(`<text x="${px(0) - 8}" y="${py(y) + 4}" text-anchor="end">${tick(y, maxY / 5)}</text>`);
  }
  parts.push(`<line x1="${px(0)}" y1="${py(0)}" x2="${px(maxX)}" y2="${py(0)}" stroke="black"/>`);
  parts.push(`<line x1="${px(0)}" y1="${py(0)}" x2="${px(0)}" y2="${py(maxY)}" stroke="black"/>`);
  parts.push(`<text x="${(px(0) + px(maxX)) / 2}" y="${height - 12}" text-anchor="middle">throughput (infer/s)</text>`);
  parts.push(`<text transform="translate(18 ${(py(0) + py(maxY)) / 2}) rotate(-90)" text-anchor="middle">${escape(yLabel)}</text>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    // In the order measured (rising concurrency or rate), not by throughput: past saturation
    // throughput can fall while latency climbs, and sorting by x drew that as a zigzag.
    const pts = s.points;
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2"${dash} points="${pts.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ')}"/>`,
    );
    for (const p of pts) {
      parts.push(`<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${color}"/>`);
      if (p.label)
        parts.push(
          `<text x="${(px(p.x) + 5).toFixed(1)}" y="${(py(p.y) - 5).toFixed(1)}" font-size="10" fill="${color}">${escape(p.label)}</text>`,
        );
    }
    const ly = m.top + 10 + i * 20;
    parts.push(
      `<line x1="${width - m.right + 15}" y1="${ly}" x2="${width - m.right + 40}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`,
    );
    parts.push(`<text x="${width - m.right + 46}" y="${ly + 4}">${escape(s.name)}</text>`);
  });
  if (marks.limit) {
    const y = py(marks.limit.y).toFixed(1);
    parts.push(`<line x1="${px(0)}" y1="${y}" x2="${px(maxX)}" y2="${y}" stroke="#555" stroke-dasharray="4 3"/>`);
    parts.push(`<text x="${px(maxX) - 4}" y="${Number(y) - 5}" text-anchor="end" fill="#555">${escape(marks.limit.label)}</text>`);
  }
  if (marks.marker) {
    const [x, y] = [px(marks.marker.x).toFixed(1), py(marks.marker.y).toFixed(1)];
    parts.push(`<circle cx="${x}" cy="${y}" r="8" fill="none" stroke="black" stroke-width="2"/>`);
    parts.push(`<text x="${Number(x) + 11}" y="${Number(y) + 16}" font-weight="bold">${escape(marks.marker.label)}</text>`);
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

function niceMax(v: number): number {
  const power = 10 ** Math.floor(Math.log10(v));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= v) return step * power;
  return 10 * power;
}

/** Every tick of an axis with the same decimals: as many as its step needs. */
function tick(v: number, step: number): string {
  let decimals = 0;
  while (decimals < 6 && Math.abs(Math.round(step * 10 ** decimals) - step * 10 ** decimals) > 1e-9) decimals++;
  return v.toFixed(decimals);
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
