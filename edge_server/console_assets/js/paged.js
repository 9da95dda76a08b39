// A table whose rows come a page at a time along the server's cursor ("Load more"), redrawn in
// place when an item changes, one of them selected. Used by the violations and sessions pages.
import { get } from "./api.js";
import { clear, errorText } from "./dom.js";

export const PAGE_SIZE = 50;

export class PagedTable {
  // path: the list route; query(): its filters; render(item): a <tr> with data-id; noun: for the status line
  constructor({ body, status, more, path, query, render, noun }) {
    Object.assign(this, { body, status, more, path, query, render, noun });
    this.rows = new Map(); // id -> { tr, item }
    this.cursor = null;
    this.selected = null;
    this.generation = 0;
    this.loading = false;
    more.addEventListener("click", () => this.load(false));
  }

  has(id) {
    return this.rows.has(id);
  }

  item(id) {
    return this.rows.get(id)?.item;
  }

  put(item, { prepend = false } = {}) {
    const old = this.rows.get(item.id);
    const tr = this.render(item);
    if (old) old.tr.replaceWith(tr);
    else if (prepend) this.body.prepend(tr);
    else this.body.append(tr);
    tr.classList.toggle("selected", this.selected === item.id);
    this.rows.set(item.id, { tr, item });
    return tr;
  }

  remove(id) {
    const old = this.rows.get(id);
    if (!old) return;
    old.tr.remove();
    this.rows.delete(id);
  }

  select(id) {
    this.selected = id;
    for (const [key, { tr }] of this.rows) tr.classList.toggle("selected", key === id);
  }

  showStatus() {
    if (this.loading) return; // a row pushed live while a page loads: "Loading…" stays until it is in
    const size = this.rows.size;
    this.status.classList.remove("error");
    this.status.textContent = size ? `${size} shown${this.cursor ? ", more on the server" : ""}` : `No ${this.noun}.`;
    this.more.hidden = !this.cursor;
  }

  say(text, bad = false) {
    this.status.textContent = text;
    this.status.classList.toggle("error", bad);
  }

  async load(reset) {
    const mine = reset ? ++this.generation : this.generation;
    if (reset) {
      this.cursor = null;
      this.rows.clear();
      clear(this.body);
    }
    this.loading = true;
    this.say("Loading…");
    try {
      const page = await get(this.path, { ...this.query(), limit: PAGE_SIZE, cursor: reset ? undefined : this.cursor });
      if (mine !== this.generation) return; // the filters changed meanwhile
      for (const item of page.items) this.put(item);
      this.cursor = page.next_cursor;
      this.loading = false;
      this.showStatus();
    } catch (error) {
      if (mine !== this.generation) return;
      this.loading = false;
      this.say(`Cannot list: ${errorText(error)}`, true);
    }
  }
}
