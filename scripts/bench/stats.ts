/** Percentiles and the small numeric helpers of the benchmark. */

export interface Summary {
  n: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an already sorted array. */
function rank(sorted: readonly number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function summarize(samples: readonly number[]): Summary {
  const s = [...samples].filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return {
    n: s.length,
    min: s[0] ?? NaN,
    p50: rank(s, 50),
    p95: rank(s, 95),
    p99: rank(s, 99),
    max: s[s.length - 1] ?? NaN,
    mean,
  };
}

export const median = (samples: readonly number[]) => summarize(samples).p50;

/** Rounds for the JSON file: 3 significant decimals of a ms is plenty. */
export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function roundSummary(s: Summary): Summary {
  return {
    n: s.n,
    min: round(s.min),
    p50: round(s.p50),
    p95: round(s.p95),
    p99: round(s.p99),
    max: round(s.max),
    mean: round(s.mean),
  };
}
