// The differential flame graph's script, run after the flame graph's (browser/flamegraph.ts)
// on the same page (src/export/diff.ts): a row of `#diff-functions` searches for its function,
// through the search box, as typing it would.

import { byId, closestTo, one } from './page.js';

const search = byId('search', HTMLInputElement);
one('#diff-functions tbody').addEventListener('click', (ev) => {
  const tr = closestTo(ev, 'tr');
  if (!tr) return;
  search.value = tr.getAttribute('data-qualname') ?? '';
  search.dispatchEvent(new Event('input'));
  window.scrollTo({ top: 0, behavior: 'smooth' });
});
