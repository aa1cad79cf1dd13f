/**
 * Helpers for untrusted JSON values (what the kernel sends, what a notebook's metadata holds):
 * type checks, copies, own properties only, and ASCII JSON text. No JupyterLab imports.
 */

import type { Json, JsonObject } from './protocol';

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function clone<T>(v: T): T {
  return v === undefined ? v : JSON.parse(JSON.stringify(v));
}

/** An own property (names such as `__proto__` or `constructor` are data here, never the
 * prototype's). */
export function own(obj: JsonObject, key: string): Json | undefined {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

/** Set an own property, whatever its name (`__proto__` included). */
export function put(obj: JsonObject, key: string, value: Json): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}

/** A copy of an object's own properties, as own properties, leaving out the keys `skip` names. */
export function copyExcept(obj: JsonObject, skip: readonly string[]): JsonObject {
  const copy: JsonObject = {};
  for (const [k, v] of Object.entries(obj)) {
    if (!skip.includes(k)) {
      put(copy, k, v);
    }
  }
  return copy;
}

export function integral(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) ? v : null;
}

/** The JSON type's name, as Python's reader names it in a reason. */
export function jsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'object' ? 'object' : typeof v;
}

/** JSON text with every non-ASCII character written as a `\uXXXX` escape (still the same JSON),
 * so one character is one byte and the text can be cut between any two characters. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** Add the string ids of a list's entries to `into`. */
export function entryIds(entries: unknown, into: Set<string>): void {
  for (const e of Array.isArray(entries) ? entries : []) {
    if (isObject(e) && typeof e.id === 'string') {
      into.add(e.id);
    }
  }
}
