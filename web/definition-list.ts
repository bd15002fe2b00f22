// A <dl> of (term, description) rows, for the pages' fact panels (web/viewer.ts, web/profile.ts).
// Text only: nothing given is read as markup.

export function fillDefinitionList(dl: HTMLElement, rows: readonly (readonly [string, string])[]): void {
  dl.textContent = '';
  for (const [term, description] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = description;
    dl.append(dt, dd);
  }
}
