// Layouts: every offset and size pyunwind needs for one target interpreter, from the
// target's own _Py_DebugOffsets (3.13+) or from built-in tables (3.11, 3.12).

import { builtinLayout, parseBuiltinId } from './builtin.js';
import { layoutFromDebugOffsets, parseVersionHex } from './debug-offsets.js';
import { LayoutError, type Layout, type LayoutSource } from './layout.js';

export * from './layout.js';
export { builtinLayout } from './builtin.js';
export {
  DEBUG_OFFSETS_READ_SIZE,
  formatVersion,
  hasDebugOffsetsCookie,
  layoutFromDebugOffsets,
  parseVersionHex,
} from './debug-offsets.js';

/** Rebuilds the Layout a capture was recorded with from the source it stored. */
export function layoutFromSource(source: LayoutSource): Layout {
  switch (source.kind) {
    case 'debug-offsets':
      return layoutFromDebugOffsets(source.bytes);
    case 'builtin': {
      const { major, minor, arch } = parseBuiltinId(source.id);
      const v = parseVersionHex(source.versionHex);
      if (v.major !== major || v.minor !== minor) {
        throw new LayoutError(
          `layout source: builtin id "${source.id}" does not match version 0x${source.versionHex.toString(16)} ` +
            `(${v.major}.${v.minor})`,
        );
      }
      return builtinLayout(source.versionHex, arch);
    }
    default:
      throw new LayoutError(`layout source: unknown kind "${String((source as { kind: unknown }).kind)}"`);
  }
}
