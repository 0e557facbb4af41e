// Sparklines: a few samples per key kept between polls, drawn as inline SVG.
const SVG = "http://www.w3.org/2000/svg";

export function sparkline(values, { width = 120, height = 22 } = {}) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const vs = values.filter((v) => v !== null && v !== undefined && Number.isFinite(v));
  if (vs.length < 2) return svg;
  const max = Math.max(...vs);
  const min = Math.min(0, ...vs);
  const span = max - min || 1;
  const step = width / (vs.length - 1);
  const points = vs.map((v, i) =>
    `${(i * step).toFixed(1)},${(height - 1 - ((v - min) / span) * (height - 2)).toFixed(1)}`);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.join(" "));
  svg.append(line);
  return svg;
}

// A progress bar of `fraction` (0..1).
export function bar(fraction, { width = 160, height = 10 } = {}) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "bar");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const todo = document.createElementNS(SVG, "rect");
  todo.setAttribute("class", "todo");
  todo.setAttribute("width", width);
  todo.setAttribute("height", height);
  const done = document.createElementNS(SVG, "rect");
  done.setAttribute("class", "done");
  done.setAttribute("width", Math.max(0, Math.min(1, fraction)) * width);
  done.setAttribute("height", height);
  svg.append(todo, done);
  return svg;
}

// Samples per key, at most `limit` each; keys not seen for a while are dropped.
export class History {
  constructor(limit = 60) {
    this.limit = limit;
    this.series = new Map();
  }

  push(key, value) {
    let s = this.series.get(key);
    if (!s) {
      s = [];
      this.series.set(key, s);
    }
    s.push(value);
    if (s.length > this.limit) s.shift();
    if (this.series.size > 5000) this.series.delete(this.series.keys().next().value);
    return s;
  }

  get(key) {
    return this.series.get(key) || [];
  }
}

// Rates from counters: `sample(key, counter, nowMs)` gives per-second change since the
// previous sample of `key` (null the first time).
export class Rates {
  constructor() {
    this.last = new Map();
  }

  sample(key, counter, nowMs) {
    const prev = this.last.get(key);
    this.last.set(key, [counter, nowMs]);
    if (!prev || nowMs <= prev[1] || counter < prev[0]) return null;
    return ((counter - prev[0]) * 1000) / (nowMs - prev[1]);
  }
}
