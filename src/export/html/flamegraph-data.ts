// The flame graph page's data: what src/export/flamegraph.ts and src/export/diff.ts embed in
// the page (htmlPage's `data`) and what its browser script (browser/flamegraph.ts) reads. Types
// only, with no imports, so the browser code's own program (browser/tsconfig.json: DOM, no
// Node) can share them without pulling in the processing code.

/** One frame of the table every view indexes: [qualname, filename, line]. null filename: a pseudo-frame. */
export type FlameFrame = [qualname: string, filename: string | null, line: number | null];

/** One row of a view's function table: [qualname, filename, self, total] (weights). */
export type FlameFunction = [qualname: string, filename: string, self: number, total: number];

/** An extra number per node, shown in the tooltip (e.g. the baseline's weight in a diff). */
export interface FlameColumn {
  label: string;
  /** one per node (additive: nodes merged by "merge lines" add theirs) */
  values: number[];
  /** count: 1,234; percent: 12.3% (the value is a fraction); signed: +12 / −3; signed-percent: +1.2% (a fraction) */
  format: 'count' | 'percent' | 'signed' | 'signed-percent';
}

/**
 * One view (a thread, or all threads merged): a tree of nodes as columns, parents before
 * children. Node i has a caller `parent[i]` (−1: under the root, which the page adds and labels
 * with `label`), a frame `frame[i]` (index into FlameGraphData.frames) and the weight of the
 * samples that ended exactly there, `self[i]`; its total is computed (self plus its subtree).
 */
export interface FlameView {
  /** stable id: "all", or the thread's key */
  id: string;
  /** shown in the selector and as the root frame */
  label: string;
  /** the base of percentages: the view's trusted weight (samples with a stack + idle) */
  base: number;
  /** weight of idle samples (shown as `<idle>` under the root when asked) */
  idle: number;
  parent: number[];
  frame: number[];
  self: number[];
  /** colouring by value (FlameGraphData.color.mode "value"): one number per node, additive */
  value?: number[];
  /** more numbers per node for the tooltip */
  columns?: FlameColumn[];
  /** the function table, by total descending */
  functions: FlameFunction[];
  /** a line shown above the graph for this view */
  note?: string;
}

export type FlameColor =
  /** warm hues by function name; the hue range tells your code, the standard library and third-party packages apart */
  | { mode: 'name' }
  /**
   * by each node's value: red for > 0, blue for < 0, white at 0, saturated at |value| ≥ scale
   * (a differential flame graph: value = the change of the frame's total, scale = the largest change)
   */
  | { mode: 'value'; scale: number; legend: { negative: string; positive: string }; label: string; format: FlameColumn['format'] };

export interface FlameGraphData {
  /** 1 */
  version: 1;
  /** what one unit of weight is called: "samples" */
  unit: string;
  color: FlameColor;
  frames: FlameFrame[];
  views: FlameView[];
  /** the view shown first (index into views) */
  initialView: number;
}
