/** Distribution summaries. Quantiles are nearest-rank: the smallest value with at least q of the values at or below it. */

export interface Distribution {
  total: number;
  min: number;
  median: number;
  p90: number;
  max: number;
}

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1];
}

export function distribution(values: readonly number[]): Distribution {
  return {
    total: values.reduce((a, b) => a + b, 0),
    min: values.length ? Math.min(...values) : 0,
    median: quantile(values, 0.5),
    p90: quantile(values, 0.9),
    max: values.length ? Math.max(...values) : 0,
  };
}
