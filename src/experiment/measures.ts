/**
 * The measures of one paired case record (article section 3, "Use paired case records").
 * Counts are summed and distributed; flags are counted per pair.
 */

export const COUNT_MEASURES = [
  'forbiddenEffects',
  'duplicateEffects',
  'parentActions',
  'totalActions',
  'parentContextUnits',
  'totalContextUnits',
  'handoffMessages',
  'coordinationUnits',
  'elapsedSteps',
] as const;
export type CountMeasure = (typeof COUNT_MEASURES)[number];

export const FLAG_MEASURES = ['correct', 'traceComplete'] as const;
export type FlagMeasure = (typeof FLAG_MEASURES)[number];

export const MEASURES = [...FLAG_MEASURES, ...COUNT_MEASURES] as const;
export type Measure = CountMeasure | FlagMeasure;

/** Measures that may be traded against a gain. Effects are never tradeable: they are hard gates. */
export const TRADEABLE_MEASURES = [
  'parentActions',
  'totalActions',
  'parentContextUnits',
  'totalContextUnits',
  'handoffMessages',
  'coordinationUnits',
  'elapsedSteps',
] as const satisfies readonly CountMeasure[];
export type TradeableMeasure = (typeof TRADEABLE_MEASURES)[number];

/** Short column labels for reports. */
export const MEASURE_LABELS: Record<Measure, string> = {
  correct: 'correct',
  traceComplete: 'trace complete',
  forbiddenEffects: 'forbidden effects',
  duplicateEffects: 'duplicate effects',
  parentActions: 'parent actions',
  totalActions: 'total actions',
  parentContextUnits: 'parent context',
  totalContextUnits: 'total context',
  handoffMessages: 'handoff messages',
  coordinationUnits: 'coordination units',
  elapsedSteps: 'elapsed steps',
};

export const isCountMeasure = (m: string): m is CountMeasure => (COUNT_MEASURES as readonly string[]).includes(m);
export const isFlagMeasure = (m: string): m is FlagMeasure => (FLAG_MEASURES as readonly string[]).includes(m);
