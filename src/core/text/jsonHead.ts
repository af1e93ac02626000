/**
 * The first `chars` characters of `JSON.stringify(value)`, written only that far: an answer of
 * megabytes (a 1,000-cell batch, a 15 MB print) costs what its head costs, not a copy of itself.
 * The same text as JSON.stringify's up to the cut: toJSON honoured, undefined, functions and
 * symbols left out of objects and null in arrays, non-finite numbers null. A cycle fills the head.
 */
export function jsonHead(value: unknown, chars: number): string {
  const head = new Head(chars);
  try {
    head.put(jsonable(value));
  } catch (error) {
    if (error !== FULL) throw error;
  }
  return head.text();
}

const FULL = Symbol('the head is full');

class Head {
  private readonly out: string[] = [];

  constructor(private room: number) {}

  text(): string {
    return this.out.join('');
  }

  /** Writes `v` (a value through its toJSON) as JSON; nothing when it has no JSON text (undefined, a function, a symbol). */
  put(v: unknown): void {
    if (typeof v === 'string') {
      // Escaping only lengthens a string: what fits of its JSON is within `room` characters of it.
      this.write(JSON.stringify(v.length > this.room ? v.slice(0, this.room) : v));
    } else if (typeof v === 'number') this.write(Number.isFinite(v) ? String(v) : 'null');
    else if (typeof v === 'boolean') this.write(String(v));
    else if (v === null) this.write('null');
    else if (Array.isArray(v)) this.array(v);
    else if (typeof v === 'object') this.object(v as Record<string, unknown>);
  }

  private array(items: readonly unknown[]): void {
    this.write('[');
    for (let i = 0; i < items.length; i++) {
      if (i > 0) this.write(',');
      const item = jsonable(items[i]);
      this.put(omitted(item) ? null : item);
    }
    this.write(']');
  }

  private object(object: Record<string, unknown>): void {
    this.write('{');
    let first = true;
    for (const key of Object.keys(object)) {
      const item = jsonable(object[key]);
      if (omitted(item)) continue;
      this.write(`${first ? '' : ','}${JSON.stringify(key)}:`);
      this.put(item);
      first = false;
    }
    this.write('}');
  }

  private write(text: string): void {
    this.out.push(text.length > this.room ? text.slice(0, this.room) : text);
    this.room -= text.length;
    if (this.room <= 0) throw FULL;
  }
}

/** A value as JSON.stringify sees it: through its toJSON, if it has one. */
function jsonable(value: unknown): unknown {
  const v = value as { toJSON?: () => unknown } | null;
  return v !== null && typeof v === 'object' && typeof v.toJSON === 'function' ? v.toJSON() : value;
}

const omitted = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol';
