// The objects a capture has described so far, as its samples see them: object records arrive
// in file order, each applying to the samples after it; one whose range overlaps earlier ones
// replaces them (a library unloaded, another mapped there), as docs/capture-format.md says.

import type { NativeObject } from './objects.js';

export class ObjectSet {
  private list: NativeObject[] = [];
  /** bumped whenever the set changes (a kernel unwinder lays its tables out again) */
  version = 0;

  /** The objects, sorted by start, disjoint. */
  get objects(): readonly NativeObject[] {
    return this.list;
  }

  add(objects: Iterable<NativeObject>): void {
    let changed = false;
    for (const o of objects) {
      if (!(o.start < o.end)) continue;
      this.list = this.list.filter((x) => !(x.start < o.end && o.start < x.end));
      let i = this.list.findIndex((x) => x.start > o.start);
      if (i < 0) i = this.list.length;
      this.list.splice(i, 0, o);
      changed = true;
    }
    if (changed) this.version++;
  }
}
