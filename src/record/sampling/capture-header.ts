// The header of a recording's capture: what the memory source says about its target, and what
// the recorder says about the recording.

import type { CaptureHeader } from '../../capture/types.js';
import { formatVersion } from '../../layout/index.js';
import type { MemorySource } from '../copy/source.js';

/** What only the recorder knows: how and when it records. */
export type RecordingFields = Pick<CaptureHeader, 'rateHz' | 'startTime' | 'recorder' | 'copy' | 'sampling' | 'facts' | 'command' | 'pid' | 'parentPid' | 'rootPid' | 'asyncio' | 'bytecode' | 'native'>;

export function captureHeader(source: MemorySource, recording: RecordingFields): CaptureHeader {
  const layout = source.layout;
  const header: CaptureHeader = {
    layoutSource: layout.source,
    pointerSize: layout.pointerSize,
    pythonVersion: formatVersion(layout.version),
    target: source.description,
    runtimeAddress: source.runtimeAddress,
    rateHz: recording.rateHz,
    startTime: recording.startTime,
    recorder: recording.recorder,
    // (every recorder copies code objects through code-cache.ts, which keeps their bytecode
    // unless told not to)
    bytecode: recording.bytecode ?? true,
  };
  // (optional fields only when given: the header encodes what is present)
  if (recording.command) header.command = recording.command;
  if (recording.pid !== undefined) header.pid = recording.pid;
  if (recording.parentPid !== undefined) header.parentPid = recording.parentPid;
  if (recording.rootPid !== undefined) header.rootPid = recording.rootPid;
  if (recording.copy !== undefined) header.copy = recording.copy;
  if (recording.sampling !== undefined) header.sampling = recording.sampling;
  if (recording.facts !== undefined) header.facts = recording.facts;
  if (recording.asyncio !== undefined) header.asyncio = recording.asyncio;
  if (recording.native !== undefined) header.native = recording.native;
  return header;
}
