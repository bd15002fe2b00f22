// Formatting shared by the command's summaries.

/** n as a percentage of d with one decimal ("12.5%"); `none` when d is 0. */
export function percent(n: number, d: number, none = '0%'): string {
  return d ? `${((100 * n) / d).toFixed(1)}%` : none;
}
