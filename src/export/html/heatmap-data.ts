// The heatmap page's data: what src/export/heatmap.ts embeds in the page (htmlPage's `data`)
// and what its browser script (browser/heatmap.ts) reads. Types only, with no imports, so the
// browser code's own program (browser/tsconfig.json: DOM, no Node) can share them.

/** A source file: its path, its lines (null: not available) and why not. */
export interface HeatmapFile {
  name: string;
  /** the text split into lines (line 1 first); null when it could not be read here */
  source: string[] | null;
  /** why `source` is null, shown on the page */
  note?: string;
}

/** One sampled line of a file: [line, self, total] (weights). */
export type HeatmapLine = [line: number, self: number, total: number];

export interface HeatmapFileCounts {
  /** index into HeatmapData.files */
  file: number;
  /** weight of samples whose innermost frame is in the file */
  self: number;
  /** weight of samples with a frame in the file, once per sample */
  total: number;
  /** sampled lines, by line number */
  lines: HeatmapLine[];
  /** [self, total] of frames of the file without a line number */
  noLine: [number, number];
}

export interface HeatmapView {
  id: string;
  label: string;
  /** the base of percentages: the view's trusted weight */
  base: number;
  /** files by total, descending */
  files: HeatmapFileCounts[];
}

export interface HeatmapData {
  version: 1;
  unit: string;
  files: HeatmapFile[];
  views: HeatmapView[];
  initialView: number;
}
