// The one lookup over address-sorted regions: which region could hold an address.

/**
 * The index of the last entry of `starts` (ascending) at or below `address`, or −1 when the
 * address is below them all. Regions do not overlap in a walk's memory, so that region is the
 * only one that can hold the address; the caller checks the length.
 */
export function lastAtOrBelow(starts: ArrayLike<bigint>, address: bigint): number {
  let lo = 0;
  let hi = starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (starts[mid]! <= address) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}
