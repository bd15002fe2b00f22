// What every page's script shares (the flame graph's, the heatmap's): reading the page's data,
// finding its elements, formatting numbers as the text report does, making elements and placing
// the tooltip. Bundled into each page's script (scripts/build-html.mjs), never loaded on its own.

import { DATA_ELEMENT_ID } from '../data-element.js';

/** The page's data: the JSON of `<script type="application/json" id="pyunwind-data">` (htmlPage's `data`). */
export function pageData<T>(): T {
  return JSON.parse(byId(DATA_ELEMENT_ID).textContent ?? '') as T;
}

/** The page's element `#id`, which the page's markup always has (an error if not: the markup and the script disagree). */
export function byId(id: string): HTMLElement;
export function byId<T extends HTMLElement>(id: string, type: new () => T): T;
export function byId(id: string, type: new () => HTMLElement = HTMLElement): HTMLElement {
  const e = document.getElementById(id);
  if (!(e instanceof type)) throw new Error(`pyunwind: the page has no ${type.name} #${id}`);
  return e;
}

/** The element `selector` finds, which the page's markup always has. */
export function one(selector: string): HTMLElement {
  const e = document.querySelector<HTMLElement>(selector);
  if (!e) throw new Error(`pyunwind: the page has no ${selector}`);
  return e;
}

/** The element an event happened in or under that matches `selector`, if any (event delegation). */
export function closestTo(ev: Event, selector: string): HTMLElement | null {
  return ev.target instanceof Element ? ev.target.closest<HTMLElement>(selector) : null;
}

/** Makes the page's API (window.__pyunwind: for tests and tools) and returns it. */
export function publish<T extends object>(api: T): T {
  (window as Window & { __pyunwind?: T }).__pyunwind = api;
  return api;
}

/** Integer grouping with commas, fractions to one decimal (the text report's style). */
export function fmt(n: number): string {
  const s = Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1);
  const parts = s.split('.');
  parts[0] = parts[0]!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return parts.join('.');
}

/** n as a percentage of `of`, one decimal; an en dash when `of` is not positive. */
export function pct(n: number, of: number): string {
  return of > 0 ? ((100 * n) / of).toFixed(1) + '%' : '\u2013';
}

/** Attribute values: null and undefined leave the attribute out, anything else is a string of it. */
export type Attributes = Record<string, string | number | null | undefined>;

/** A new element with `attrs` set and `text` as its text (null and undefined: none). */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attributes | null, text?: string | number | null): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (attrs) {
    for (const k in attrs) {
      const v = attrs[k];
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
  }
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

/** The last part of a path, '/' or '\' separated. */
export function basename(p: string): string {
  const i = Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\'));
  return i >= 0 ? p.slice(i + 1) : p;
}

/** Puts the tooltip beside the pointer, flipped to the other side where it would leave the window. */
export function placeTooltip(tip: HTMLElement, ev: MouseEvent): void {
  const pad = 14;
  const w = tip.offsetWidth;
  const h = tip.offsetHeight;
  let x = ev.clientX + pad;
  let y = ev.clientY + pad;
  if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - w - pad);
  if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - h - pad);
  tip.style.left = x + 'px';
  tip.style.top = y + 'px';
}
